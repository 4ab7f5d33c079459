/**
 * Swedish personal numbers (personnummer) as the bankid pages take them: 12 digits, YYYYMMDDNNNN, the
 * last one a Luhn check digit over the other ten but the century. The test provider (testProvider.ts)
 * checks the number a signer enters with `parsePersonalNumber`; the test page's example and the tests
 * make valid ones with `testPersonalNumber`. Nothing here looks a number up.
 */
import { ProviderRefusal } from './provider.ts';

/** A personal number as the test page takes it: 12 digits, an optional `-` or `+` before the last four. */
const PERSONAL_NUMBER = /^(\d{8})[-+]?(\d{4})$/;

/** The Luhn check digit of the nine digits YYMMDDNNN (Swedish personal numbers). */
function checkDigit(nine: string): number {
  let sum = 0;
  for (let i = 0; i < 9; i++) {
    const d = Number(nine[i]) * (i % 2 === 0 ? 2 : 1);
    sum += d > 9 ? d - 9 : d;
  }
  return (10 - (sum % 10)) % 10;
}

/**
 * The personal number in its 12-digit form, or a ProviderRefusal saying what is wrong: a real date of
 * birth (or a coordination number, day + 60) not in the future, and the check digit.
 */
export function parsePersonalNumber(raw: string, now: number): string {
  const m = PERSONAL_NUMBER.exec(raw.trim());
  if (!m) throw new ProviderRefusal('personal_number', 'Enter a personal number of 12 digits: YYYYMMDDNNNN (for example 199001011239).');
  const [date, tail] = [m[1]!, m[2]!];
  const year = Number(date.slice(0, 4));
  const month = Number(date.slice(4, 6));
  const rawDay = Number(date.slice(6, 8));
  const day = rawDay > 60 ? rawDay - 60 : rawDay;
  const born = Date.UTC(year, month - 1, day);
  const valid = new Date(born);
  if (year < 1900 || valid.getUTCFullYear() !== year || valid.getUTCMonth() !== month - 1 || valid.getUTCDate() !== day || born > now) {
    throw new ProviderRefusal('personal_number', `The personal number does not start with a date of birth (YYYYMMDD): ${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)} is not one.`);
  }
  if (checkDigit(date.slice(2) + tail.slice(0, 3)) !== Number(tail[3])) throw new ProviderRefusal('personal_number', 'The personal number’s last digit (its check digit) is wrong. Check the number and try again.');
  return date + tail;
}

/** A valid test personal number for a date of birth and a serial (tests and the page's example). */
export function testPersonalNumber(yyyymmdd: string, serial = '123'): string {
  return `${yyyymmdd}${serial}${checkDigit(yyyymmdd.slice(2) + serial)}`;
}
