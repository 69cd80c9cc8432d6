/**
 * Rulesets as Vela's `compiler/types/yaml/ruleset.go` reads them: short form into `if`, event
 * shorthands expanded, operator and matcher moved onto each side, patterns and eval checked.
 */
import type { Node } from 'yaml';
import { EVAL_SUBSET, parseEval } from '../eval.ts';
import { filepathMatch } from '../glob.ts';
import { emptyRules, type Matcher, type Operator, type Rules, type Ruleset } from '../model.ts';
import { goRegExp } from '../ruleset.ts';
import type { Ctx, Entry } from './document.ts';
import { RULE_KEYS, RULES_KEYS, RULESET_KEYS } from './keys.ts';

function expandEvents(events: string[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e === 'pull_request') out.push('pull_request:opened', 'pull_request:synchronize', 'pull_request:reopened');
    else if (e === 'deployment') out.push('deployment:created');
    else if (e === 'comment') out.push('comment:created', 'comment:edited');
    else out.push(e);
  }
  return out;
}

function parseMatcher(ctx: Ctx, entry: Entry | undefined): Matcher | '' {
  const text = ctx.string(entry, 'matcher');
  if (text === '') return '';
  if (text === 'filepath' || text === 'regexp') return text;
  if (text === 'regex') return 'regexp';
  ctx.error(entry?.value, `invalid matcher "${text}"`, 'use filepath or regexp', entry?.keyNode);
  return '';
}

function parseOperator(ctx: Ctx, entry: Entry | undefined): Operator | '' {
  const text = ctx.string(entry, 'operator');
  if (text === '') return '';
  if (text.toLowerCase() === 'and' || text.toLowerCase() === 'or') return text.toLowerCase() as Operator;
  ctx.error(entry?.value, `invalid operator "${text}"`, 'use and or or', entry?.keyNode);
  return '';
}

function parseRuleLists(ctx: Ctx, keys: Map<string, Entry>, rules: Rules): void {
  for (const key of RULE_KEYS) {
    const entry = keys.get(key);
    if (entry === undefined) continue;
    if (key === 'eval') {
      // compiler/types/pipeline/ruleset.go MatchRules compiles it with expr-lang: check it now.
      const source = ctx.string(entry, 'ruleset eval');
      const parsed = parseEval(source);
      if (!parsed.ok) ctx.error(entry.value, `ruleset eval ${JSON.stringify(source)}: ${parsed.error}`, EVAL_SUBSET, entry.keyNode);
      rules.eval = source;
      continue;
    }
    let values = ctx.strings(entry, `ruleset ${key}`);
    if (key === 'event') values = expandEvents(values);
    (rules[key] as string[]).push(...values);
  }
}

function checkPatterns(ctx: Ctx, rules: Rules, node: Node): void {
  for (const key of RULE_KEYS) {
    if (key === 'eval') continue;
    for (const pattern of rules[key] as string[]) {
      try {
        if (rules.matcher === 'regexp') goRegExp(pattern);
        else filepathMatch(pattern, '');
      } catch (error) {
        ctx.error(node, `invalid ${key} pattern "${pattern}": ${(error as Error).message}`);
      }
    }
  }
}

/** Vela's `Ruleset.UnmarshalYAML`: short-form rules go to `if`; operator/matcher move onto each side. */
export function parseRuleset(ctx: Ctx, entry: Entry | undefined): Ruleset {
  const ruleset: Ruleset = { if: emptyRules(), unless: emptyRules(), matcher: 'filepath', operator: 'and', continue: false };
  if (entry === undefined || ctx.isNull(entry.value) || entry.value === null) return ruleset;
  const keys = ctx.known(entry.value, 'ruleset', RULESET_KEYS);
  if (keys === null) return ruleset;
  const matcher = parseMatcher(ctx, keys.get('matcher')) || 'filepath';
  const operator = parseOperator(ctx, keys.get('operator')) || 'and';
  ruleset.continue = ctx.bool(keys.get('continue'), 'ruleset continue');
  const side = (name: 'if' | 'unless'): Rules | null => {
    const e = keys.get(name);
    if (e === undefined || e.value === null || ctx.isNull(e.value)) return null;
    const rules = emptyRules();
    const sideKeys = ctx.known(e.value, `ruleset ${name}`, RULES_KEYS);
    if (sideKeys === null) return rules;
    parseRuleLists(ctx, sideKeys, rules);
    rules.matcher = parseMatcher(ctx, sideKeys.get('matcher'));
    rules.operator = parseOperator(ctx, sideKeys.get('operator'));
    return rules;
  };
  const ifRules = side('if') ?? emptyRules();
  parseRuleLists(ctx, keys, ifRules);
  if (ifRules.operator === '') ifRules.operator = operator;
  if (ifRules.matcher === '') ifRules.matcher = matcher;
  ruleset.if = ifRules;
  const unlessRules = side('unless');
  if (unlessRules !== null) {
    if (unlessRules.operator === '') unlessRules.operator = operator;
    if (unlessRules.matcher === '') unlessRules.matcher = matcher;
    ruleset.unless = unlessRules;
  }
  checkPatterns(ctx, ruleset.if, entry.value);
  checkPatterns(ctx, ruleset.unless, entry.value);
  return ruleset;
}
