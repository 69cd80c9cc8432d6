/**
 * Go (RE2) regular expressions in JavaScript, and the error a ruleset that cannot be evaluated
 * raises.
 */

/** A ruleset that cannot be evaluated: a bad regular expression or glob, or an `eval` expression that fails. */
export class RulesetError extends Error {
  override readonly name = 'RulesetError';
}

const regexCache = new Map<string, RegExp>();

/**
 * Compiles a Go (RE2) regular expression to a JavaScript one: `(?P<name>` becomes `(?<name>`,
 * a leading `(?i)`/`(?s)`/`(?m)` becomes a flag. Throws {@link RulesetError} when it does not compile.
 */
export function goRegExp(pattern: string): RegExp {
  const cached = regexCache.get(pattern);
  if (cached !== undefined) return cached;
  let source = pattern.replaceAll('(?P<', '(?<');
  let flags = '';
  const lead = /^\(\?([ims]+)\)/.exec(source);
  if (lead !== null) {
    flags = [...new Set(lead[1])].join('');
    source = source.slice(lead[0].length);
  }
  let re: RegExp;
  try {
    re = new RegExp(source, `${flags}u`);
  } catch {
    try {
      re = new RegExp(source, flags);
    } catch (error) {
      throw new RulesetError(`error in regex pattern ${pattern}: ${(error as Error).message}`);
    }
  }
  regexCache.set(pattern, re);
  return re;
}
