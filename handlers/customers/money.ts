import type { components } from '../../generated/openapi.ts';
import { invalidInput } from '../../server/errors.ts';

type Money = components['schemas']['Money'];
type WeightedMoney = components['schemas']['WeightedMoney'];
type Currency = components['schemas']['Currency'];

/** ISO 4217 minor units other than 2, as the Currency schema's description states them. */
const MINOR_UNITS: Partial<Record<Currency, number>> = {
  BIF: 0, CLP: 0, DJF: 0, GNF: 0, ISK: 0, JPY: 0, KMF: 0, KRW: 0, PYG: 0, RWF: 0, UGX: 0, VND: 0, VUV: 0, XAF: 0, XOF: 0, XPF: 0,
  BHD: 3, IQD: 3, JOD: 3, KWD: 3, LYD: 3, OMR: 3, TND: 3,
};

/** Decimals of a currency's minor unit (ISO 4217). */
export const minorUnits = (currency: Currency): number => MINOR_UNITS[currency] ?? 2;

/**
 * Money in its one stored form: exactly the currency's decimals (`"1200"` EUR is `"1200.00"`), so
 * that equal amounts compare equal. More decimals than the currency has is 400 (`field` names it).
 */
export function canonicalMoney(money: Money, field: string): Money {
  const digits = minorUnits(money.currency);
  const [whole = '0', fraction = ''] = money.amount.split('.');
  if (fraction.length > digits) {
    throw invalidInput(`${field}.amount "${money.amount}" has ${fraction.length} decimals; ${money.currency} amounts have at most ${digits}.`);
  }
  return { amount: digits ? `${whole}.${fraction.padEnd(digits, '0')}` : whole, currency: money.currency };
}

/**
 * `money` × `percent` / 100, exact (decimal arithmetic on integers, never a float): the currency's
 * decimals, and up to two more when the product needs them (`"10.01"` EUR at 15 % is `"1.5015"`).
 */
export function weightedMoney(money: Money, percent: number): WeightedMoney {
  const digits = minorUnits(money.currency);
  const [whole = '0', fraction = ''] = money.amount.split('.');
  const scale = digits + 2;
  const product = (BigInt(whole + fraction.padEnd(digits, '0')) * BigInt(percent)).toString().padStart(scale + 1, '0');
  const integer = product.slice(0, -scale).replace(/^0+(?=\d)/, '');
  let decimals = product.slice(-scale);
  while (decimals.length > digits && decimals.endsWith('0')) decimals = decimals.slice(0, -1);
  return { amount: decimals ? `${integer}.${decimals}` : integer, currency: money.currency };
}
