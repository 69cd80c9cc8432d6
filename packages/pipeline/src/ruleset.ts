/**
 * Ruleset evaluation with Vela's semantics (`compiler/types/pipeline/ruleset.go` and
 * `Container.Execute`).
 */
import { runEval } from './eval.ts';
import { filepathMatch } from './glob.ts';
import { goRegExp, RulesetError } from './go-regexp.ts';

export { goRegExp, RulesetError };
import type { Container, Matcher, Operator, Rules, Ruleset } from './model.ts';

/**
 * What rules are matched against (Vela `pipeline.RuleData`).
 *
 * `event` is `event` or `event:action` (`push`, `pull_request:opened`, `comment:created`, …);
 * `tag` is the tag name without `refs/tags/`; `status` is the build's status so far
 * (`pending` at compile time, then `running`, `success`, `failure`, …).
 */
export interface RuleData {
  branch?: string;
  comment?: string;
  event?: string;
  path?: string[];
  repo?: string;
  sender?: string;
  status?: string;
  tag?: string;
  target?: string;
  label?: string[];
  instance?: string;
  /** The container's environment, which `eval` rules are evaluated against (not evaluated when absent). */
  env?: Record<string, string>;
}

/** True when no rule of `rules` is set (operator and matcher do not count), as Vela's `Rules.Empty`. */
export function rulesEmpty(rules: Rules): boolean {
  return (
    rules.branch.length === 0 &&
    rules.comment.length === 0 &&
    rules.event.length === 0 &&
    rules.path.length === 0 &&
    rules.repo.length === 0 &&
    rules.sender.length === 0 &&
    rules.status.length === 0 &&
    rules.tag.length === 0 &&
    rules.target.length === 0 &&
    rules.label.length === 0 &&
    rules.instance.length === 0 &&
    rules.eval === ''
  );
}

/**
 * Vela's `MatchRule`: true when any `data` value matches any pattern.
 *
 * Gotcha: `matcher` `regexp` (or `regex`) searches (unanchored: `main` matches `not-main`);
 * anything else is a Go `filepath.Match` glob that must match the whole value.
 */
export function matchRule(data: readonly string[], patterns: readonly string[], matcher: string): boolean {
  const regex = matcher === 'regexp' || matcher === 'regex';
  for (const pattern of patterns) {
    const re = regex ? goRegExp(pattern) : null;
    for (const value of data) {
      if (re !== null) {
        if (re.test(value)) return true;
      } else {
        try {
          if (filepathMatch(pattern, value)) return true;
        } catch (error) {
          throw new RulesetError((error as Error).message);
        }
      }
    }
  }
  return false;
}

/**
 * Vela's `RuleData.MatchRules`: evaluates one side of a ruleset.
 *
 * With operator `and` every set rule must match; with `or` one is enough. At compile time
 * (`status` `pending`) `status` rules are skipped, and an `or` side with a status rule matches.
 * A `running` status counts as `success` for status rules.
 * `operator`/`matcher` default to the given fallbacks (the ruleset's), then `and`/`filepath`.
 */
function matchRules(rules: Rules, data: RuleData, fallback?: { operator?: Operator; matcher?: Matcher }): boolean {
  const operator = rules.operator !== '' ? rules.operator : (fallback?.operator ?? 'and');
  const matcher = rules.matcher !== '' ? rules.matcher : (fallback?.matcher ?? 'filepath');
  const isOr = operator.toLowerCase() === 'or';
  const isCompileTime = data.status === 'pending';
  if (rules.status.length > 0 && isCompileTime && isOr) return true;
  // Vela runs eval first, and only with an environment (compile time: the container's).
  if (rules.eval !== '' && data.env !== undefined) {
    const match = runEval(rules.eval, data.env);
    if (isOr && match) return true;
    if (!isOr && !match) return false;
  }
  const pairs: [string[], string[]][] = [
    [[data.branch ?? ''], rules.branch],
    [[data.comment ?? ''], rules.comment],
    [[data.event ?? ''], rules.event],
    [data.path ?? [], rules.path],
    [[data.repo ?? ''], rules.repo],
    [[data.sender ?? ''], rules.sender],
    [[data.tag ?? ''], rules.tag],
    [[data.target ?? ''], rules.target],
    [data.label ?? [], rules.label],
    [[data.instance ?? ''], rules.instance],
  ];
  if (!isCompileTime) {
    let status = data.status ?? '';
    if (rules.status.length > 0 && status === 'running') status = 'success';
    pairs.push([[status], rules.status]);
  }
  let match = true;
  for (const [values, patterns] of pairs) {
    if (patterns.length === 0) continue;
    match = matchRule(values, patterns, matcher);
    if (isOr && match) return true;
    if (!isOr && !match) return false;
  }
  return match;
}

/**
 * Vela's `RuleData.Match`: true when the `unless` side does not match and the `if` side does
 * (an empty side is ignored; an empty ruleset matches).
 *
 * Throws {@link RulesetError} for a bad pattern or an `eval` expression that fails.
 */
export function matchRuleset(ruleset: Ruleset, data: RuleData): boolean {
  const fallback = { operator: ruleset.operator, matcher: ruleset.matcher };
  if (rulesEmpty(ruleset.if) && rulesEmpty(ruleset.unless)) return true;
  if (!rulesEmpty(ruleset.unless) && matchRules(ruleset.unless, data, fallback)) return false;
  if (rulesEmpty(ruleset.if)) return true;
  return matchRules(ruleset.if, data, fallback);
}

/** True when neither side of the ruleset has a `status` rule (Vela's "no status" check in `Container.Execute`). */
function rulesetHasNoStatus(ruleset: Ruleset): boolean {
  return ruleset.if.status.length === 0 && ruleset.unless.status.length === 0;
}

/**
 * Whether a container runs now, as Vela's `Container.Execute` decides at run time.
 *
 * Without `status` rules the container runs only while the build has not failed (`data.status`
 * is neither `failure` nor `error`): the other rules were already applied when the pipeline was
 * compiled (see {@link matchRuleset}). With a `status` rule the whole ruleset is matched.
 *
 * Gotcha: `ruleset.continue` is not about running: it says a failure of this container does not
 * fail the build.
 */
export function evaluateRuleset(ruleset: Ruleset, data: RuleData): boolean {
  if (rulesetHasNoStatus(ruleset)) return !(data.status === 'failure' || data.status === 'error');
  return matchRuleset(ruleset, data);
}

/** {@link evaluateRuleset} for a container's ruleset, with the container's environment as `env`. */
export function shouldExecute(container: Container, data: RuleData): boolean {
  return evaluateRuleset(container.ruleset, { ...data, env: container.environment });
}
