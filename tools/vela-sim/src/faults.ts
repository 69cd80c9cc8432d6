// Fault injection: the next K calls matching a route pattern fail in a chosen way.

/** How an injected fault answers. */
export type FaultKind =
  /** An HTTP error status (default 500) with a JSON `{"error"}` body. */
  | 'status'
  /** No answer at all: the request is held open until the client gives up or the sim closes. */
  | 'timeout'
  /** An HTTP status (default 502) with an HTML body, as a proxy in front of the server would send. */
  | 'non-json'
  /** The connection is destroyed without a response. */
  | 'reset';

/** A fault rule as given to `VelaSim.fail`. */
export interface FaultRule {
  /** HTTP method to match; any when absent. */
  method?: string;
  /**
   * Path to match: a RegExp tested against the path (no query), or a pattern where `*` matches
   * one path segment and a trailing `**` any rest, e.g. `/api/v1/repos/{*}/{*}/builds/{*}/steps/{*}/logs` written without the braces.
   */
  path: string | RegExp;
  kind: FaultKind;
  /** How many matching calls fail (default 1). */
  times?: number;
  /** Status for `status` and `non-json` faults. */
  status?: number;
  /**
   * `before` (default): the call fails without touching the sim's state. `after`: the call is
   * handled (state changes) and then its response is replaced by the fault: a lost response.
   */
  when?: 'before' | 'after';
}

/** An active rule with its remaining count. */
export interface ActiveFault {
  rule: FaultRule;
  remaining: number;
  match: (method: string, path: string) => boolean;
}

/** Compiles a path pattern (see FaultRule.path) into a matcher. */
export function compilePathPattern(pattern: string | RegExp): (path: string) => boolean {
  if (pattern instanceof RegExp) return (p) => pattern.test(p);
  const source = pattern
    .split('/')
    .map((seg) => (seg === '**' ? '.*' : seg === '*' ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  const re = new RegExp(`^${source}$`);
  return (p) => re.test(p);
}

/** The fault list of one sim. */
export class FaultTable {
  readonly #active: ActiveFault[] = [];

  /** Adds a rule. */
  add(rule: FaultRule): void {
    const matchPath = compilePathPattern(rule.path);
    const method = rule.method?.toUpperCase();
    this.#active.push({
      rule,
      remaining: rule.times ?? 1,
      match: (m, p) => (method === undefined || method === m) && matchPath(p),
    });
  }

  /** Takes (consumes one use of) the first rule matching the call, if any. */
  take(method: string, path: string): FaultRule | undefined {
    const i = this.#active.findIndex((f) => f.remaining > 0 && f.match(method, path));
    if (i < 0) return undefined;
    const f = this.#active[i]!;
    f.remaining -= 1;
    if (f.remaining === 0) this.#active.splice(i, 1);
    return f.rule;
  }

  /** Removes every rule. */
  clear(): void {
    this.#active.length = 0;
  }

  /** How many injected failures are still pending. */
  pending(): number {
    return this.#active.reduce((n, f) => n + f.remaining, 0);
  }
}
