/**
 * The `Date` header of the worker API's responses (RFC 9110 section 5.6.7, IMF-fixdate:
 * `Sun, 06 Nov 1994 08:49:37 GMT`), set by the API itself rather than by node:http. Node formats
 * it with `Date.prototype.toUTCString`, and V8 looks up the host time zone's display name for
 * the first date a process formats, in any format, UTC included: ICU's time zone data and code,
 * ~1.2 MB of an idle worker's memory for a name the header never shows. Formatted from the UTC
 * fields here, the worker loads none of it (tools/bench worker-memory).
 */
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

const two = (n: number): string => (n < 10 ? `0${n}` : String(n));

/** `ms` (milliseconds since the epoch, years 0-9999) as an HTTP date: what `new Date(ms).toUTCString()` returns. */
export function httpDate(ms: number): string {
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  return (
    `${DAYS[d.getUTCDay()]}, ${two(d.getUTCDate())} ${MONTHS[d.getUTCMonth()]} ${String(year).padStart(4, '0')} ` +
    `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} GMT`
  );
}

let cachedSecond = Number.NaN;
let cached = '';

/** The HTTP date of now, formatted once per second (as node:http does). */
export function httpDateNow(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cached = httpDate(now);
  }
  return cached;
}
