/**
 * What one `POST /v1/track` request says: its body checked against the document and turned into an
 * event input, its User-Agent parsed, its client address and country read from the configured
 * trusted headers.
 */
import type { IncomingMessage } from 'node:http';
import { createAjv } from '../../server/ajv.cjs';
import Bowser from 'bowser';
import { isbot } from 'isbot';
import { document } from '../../generated/document.ts';
import type { components } from '../../generated/openapi.ts';
import { invalidInput, invalidJson } from '../../server/errors.ts';
import { describe, textProblem } from '../../server/validation.ts';
import { type AnalyticsEventInput, eventProblem, referrerHost } from './input.ts';

/** ISO 3166-1 alpha-2 codes (officially assigned). */
const COUNTRIES = new Set(
  ('AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR ' +
    'CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ' +
    'ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ ' +
    'MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI ' +
    'SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW').split(' '),
);

/** The request body as the document defines it (components/schemas/TrackEvent.yaml). */
type TrackBody = components['schemas']['TrackEvent'];

const validateBody = createAjv().compile<TrackBody>(
  (document.components.schemas as Record<string, object>).TrackEvent!,
);

const bodyProblem = () => {
  const e = validateBody.errors?.[0];
  return e ? describe('body', e) : 'body is invalid';
};

/**
 * Checks a body and derives the event from it (time and visitor are left for the caller: '-' and
 * 0); throws the documented 400 (`invalid_json` / `invalid_input`).
 */
export function parseTrackBody(text: string): { key: string; input: AnalyticsEventInput } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidJson('The body is not valid JSON.');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidJson('The body must be a JSON object.');
  if (!validateBody(value)) throw invalidInput(bodyProblem());
  const unfit = textProblem('body', value);
  if (unfit) throw invalidInput(unfit);
  const body = value;
  if (body.type === 'engagement' && body.engaged_ms === undefined) throw invalidInput('body.engaged_ms is required for an engagement');
  if (body.type === 'pageview' && body.engaged_ms !== undefined) throw invalidInput('body.engaged_ms is only for an engagement');
  let page: URL;
  try {
    page = new URL(body.url);
  } catch {
    throw invalidInput('body.url must be an absolute http(s) URL');
  }
  if (page.protocol !== 'http:' && page.protocol !== 'https:') throw invalidInput('body.url must be an absolute http(s) URL');

  const input: AnalyticsEventInput = { type: body.type, ts: 0, visitor: '-', path: page.pathname };
  const referrer = body.referrer?.trim();
  if (referrer && referrerHost(referrer) !== page.hostname.toLowerCase()) input.referrer = referrer;
  const source = page.searchParams.get('utm_source')?.trim();
  if (source) input.utm_source = source;
  const campaign = page.searchParams.get('utm_campaign')?.trim();
  if (campaign) input.utm_campaign = campaign;
  if (body.engaged_ms !== undefined) input.engaged_ms = body.engaged_ms;
  const problem = eventProblem(input);
  if (problem) throw invalidInput(`the event derived from the body is invalid: ${problem}`);
  return { key: body.key, input };
}

export interface Agent {
  bot: boolean;
  device?: string;
  browser?: string;
  os?: string;
}

const DEVICES = new Set(['desktop', 'mobile', 'tablet', 'tv']);

/** Device, browser and OS of a User-Agent (bowser); bots and empty agents are `bot`. */
export function parseAgent(ua: string): Agent {
  if (!ua.trim() || isbot(ua)) return { bot: true };
  const p = Bowser.parse(ua);
  const agent: Agent = { bot: false };
  if (p.platform.type && DEVICES.has(p.platform.type)) agent.device = p.platform.type;
  if (p.browser.name) agent.browser = p.browser.name;
  if (p.os.name) agent.os = p.os.name;
  return agent;
}

/** The client address: the first of the trusted header's list, else the socket's peer (IPv4 unmapped). */
export function clientIp(req: IncomingMessage, header: string | null): string {
  const value = header ? req.headers[header] : undefined;
  const raw = (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim() || req.socket.remoteAddress || '';
  return raw.startsWith('::ffff:') ? raw.slice(7) : raw;
}

/** The visitor's country from the trusted header, when it is an ISO 3166-1 alpha-2 code. */
export function countryOf(req: IncomingMessage, header: string | null): string | undefined {
  if (!header) return undefined;
  const value = req.headers[header];
  const code = (Array.isArray(value) ? value[0] : value)?.trim().toUpperCase();
  return code && COUNTRIES.has(code) ? code : undefined;
}
