/**
 * `${VAR}` substitution in a compiled step, as Vela's `compiler/native/substitute.go`
 * `SubstituteSteps` does it with the step's own environment.
 */
import { envsubst, velaLookup } from '../substitute.ts';
import type { Ctx } from './document.ts';
import type { Parsed } from './containers.ts';
import { RULE_KEYS } from './keys.ts';

export function substituteContainer(ctx: Ctx, p: Parsed): void {
  const lookup = velaLookup(p.container.environment);
  const sub = (s: string): string => {
    try {
      return envsubst(s, lookup);
    } catch (error) {
      ctx.error(
        p.origin.node,
        `unable to substitute environment variables in step ${p.container.name}: ${(error as Error).message}`,
        'escape a literal ${ as $${',
      );
      return s;
    }
  };
  const c = p.container;
  c.name = sub(c.name);
  c.image = sub(c.image);
  c.commands = c.commands.map(sub);
  c.entrypoint = c.entrypoint.map(sub);
  c.user = sub(c.user);
  c.report_as = sub(c.report_as);
  c.environment = Object.fromEntries(Object.entries(c.environment).map(([k, v]) => [k, sub(v)]));
  c.volumes = c.volumes.map((v) => ({ source: sub(v.source), destination: sub(v.destination), access_mode: sub(v.access_mode) }));
  c.secrets = c.secrets.map((s) => ({ source: sub(s.source), target: sub(s.target) }));
  for (const side of [c.ruleset.if, c.ruleset.unless]) {
    for (const key of RULE_KEYS) {
      if (key !== 'eval') side[key] = (side[key] as string[]).map(sub);
    }
  }
}
