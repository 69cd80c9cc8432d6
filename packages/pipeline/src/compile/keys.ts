/**
 * The keys Vela's pipeline types know (go-vela/server `compiler/types/yaml`), and the "did you
 * mean" suggestions for the others.
 */

export const TOP_KEYS = ['version', 'metadata', 'environment', 'worker', 'secrets', 'services', 'stages', 'steps', 'templates', 'deployment', 'git'];
export const METADATA_KEYS = ['template', 'clone', 'environment', 'auto_cancel', 'render_inline'];
export const STEP_KEYS = [
  'name',
  'image',
  'commands',
  'entrypoint',
  'environment',
  'parameters',
  'secrets',
  'template',
  'ruleset',
  'pull',
  'detach',
  'privileged',
  'user',
  'ulimits',
  'volumes',
  'report_as',
  'id_request',
  'git',
  'artifacts',
];
export const SERVICE_KEYS = ['name', 'image', 'entrypoint', 'environment', 'ports', 'pull', 'ulimits', 'user', 'ruleset'];
export const STAGE_KEYS = ['name', 'needs', 'independent', 'environment', 'steps'];
export const SECRET_KEYS = ['name', 'key', 'engine', 'type', 'origin', 'pull'];
export const ORIGIN_KEYS = ['name', 'image', 'environment', 'parameters', 'secrets', 'pull', 'ruleset', 'id_request'];
export const RULE_KEYS = ['branch', 'comment', 'event', 'path', 'repo', 'sender', 'status', 'tag', 'target', 'label', 'instance', 'eval'];
export const RULESET_KEYS = [...RULE_KEYS, 'if', 'unless', 'matcher', 'operator', 'continue'];
export const RULES_KEYS = [...RULE_KEYS, 'matcher', 'operator'];

/** Levenshtein distance, for "did you mean" hints. */
function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] ?? 0;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] ?? 0;
      prev[j] = Math.min(up + 1, (prev[j - 1] ?? 0) + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length] ?? 0;
}

/** The closest candidate to `word` when it is close enough to be a likely typo. */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}
