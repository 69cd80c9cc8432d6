/**
 * Vela's outputs: what a step writes to `/vela/outputs/*.env` becomes environment of the steps
 * after it, as go-vela/worker does it.
 *
 * Upstream (go-vela/worker, read 2026-12-03):
 * - `executor/linux/outputs.go` `outputSvc.poll` reads four files from the outputs container:
 *   `.env` and `base64.env` feed the outputs, `masked.env` and `masked.base64.env` the masked
 *   outputs; each is parsed with go-envparse (a file that fails to parse contributes nothing);
 *   the values of the two `base64` files are decoded with `base64.StdEncoding` — a value that
 *   does not decode is kept as written (the loop `continue`s before replacing it). Within each
 *   map the base64 file is read second, so it wins over the plain one.
 * - `executor/linux/build.go` `ExecBuild` and `stage.go` `ExecStage` poll before every step (so a
 *   step sees what the steps before it wrote, and the files are read whole each time: a key removed
 *   from a file is gone), then `internal/outputs/process.go` `Process` lays them on the step.
 * - `Process`: outputs never overwrite the step's own environment; an environment value `$KEY`
 *   becomes output KEY's value; masked outputs win over plain ones of the same name; masked
 *   values that are not blank are added to the step's secrets, so they are masked in its log.
 * - Then `Container.Substitute` (go-vela/server `compiler/types/pipeline/container.go`) replaces
 *   `${KEY}` in every field with the environment — outputs included — and a name it does not
 *   know with nothing. Berth refuses an image whose `${KEY}` is unknown instead (see
 *   {@link missingImageNames}): Vela would try to pull `my-org/:latest`.
 * - With no outputs image configured (`VELA_EXECUTOR_OUTPUTS_IMAGE` empty) every outputs call is a
 *   no-op; on Kubernetes `PollOutputsContainer` is a no-op too ("pod environments cannot be dynamic").
 */
import { decodeStdBase64, parseEnvFile } from './env-file.ts';

/** The directory steps write outputs to (Vela's fixed path). */
export const OUTPUTS_DIR = '/vela/outputs';

/** The four files of the outputs directory, in the order Vela reads them. */
export const OUTPUT_FILES = ['.env', 'masked.env', 'base64.env', 'masked.base64.env'] as const;

/** One of {@link OUTPUT_FILES}. */
export type OutputFile = (typeof OUTPUT_FILES)[number];

/** The outputs of a build so far: plain and masked, by name. */
export interface Outputs {
  readonly plain: Readonly<Record<string, string>>;
  readonly masked: Readonly<Record<string, string>>;
}

/** No outputs. */
export const NO_OUTPUTS: Outputs = { plain: {}, masked: {} };

/** {@link decodeOutputs}'s answer: the outputs and a warning per file or value it could not use. */
export interface DecodedOutputs {
  outputs: Outputs;
  warnings: string[];
}

/**
 * The outputs in the four files' contents (`undefined`: the file does not exist), decoded as
 * `outputSvc.poll` does. Never throws: what cannot be used is dropped (a file that does not
 * parse) or kept as written (a value that is not base64), as Vela does, and said in a warning.
 */
export function decodeOutputs(files: Partial<Record<OutputFile, Uint8Array | undefined>>): DecodedOutputs {
  const plain: Record<string, string> = {};
  const masked: Record<string, string> = {};
  const warnings: string[] = [];
  for (const file of OUTPUT_FILES) {
    const bytes = files[file];
    if (bytes === undefined || bytes.length === 0) continue;
    const parsed = parseEnvFile(Buffer.from(bytes).toString('utf8'));
    if (!parsed.ok) {
      warnings.push(`${OUTPUTS_DIR}/${file} was ignored: line ${parsed.line}: ${parsed.error} (write KEY=VALUE lines)`);
      continue;
    }
    const values = parsed.values;
    if (file.includes('base64')) {
      for (const [key, value] of Object.entries(values)) {
        const decoded = decodeStdBase64(value);
        if (decoded === undefined) warnings.push(`${OUTPUTS_DIR}/${file}: the value of ${key} is not padded standard base64; it is used as written`);
        else values[key] = decoded;
      }
    }
    Object.assign(file.startsWith('masked') ? masked : plain, values);
  }
  return { outputs: { plain, masked }, warnings };
}

/**
 * Lays the outputs on a step's environment as `internal/outputs/process.go` `Process` does, and
 * returns the masked values to mask (blank ones are not). `environment` is the step's
 * environment so far (compiled, worker variables, secrets): none of its names is overwritten.
 */
export function applyOutputs(environment: Record<string, string>, outputs: Outputs): string[] {
  const keep = (values: Readonly<Record<string, string>>): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(values)) if (!Object.hasOwn(environment, key)) out[key] = value;
    return out;
  };
  const plain = keep(outputs.plain);
  const masked = keep(outputs.masked);
  const all = { ...plain, ...masked };
  for (const [key, value] of Object.entries(environment)) {
    if (value.startsWith('$') && Object.hasOwn(all, value.slice(1))) environment[key] = all[value.slice(1)] as string;
  }
  Object.assign(environment, all);
  return Object.values(masked).filter((value) => value.trim() !== '');
}

/**
 * Whether `a` and `b` are the same outputs (the same names and values, plain and masked): a step
 * prepared with `a` has the environment it would get with `b` (build/steps.ts, a container set up
 * ahead of its step is kept only then).
 */
export function sameOutputs(a: Outputs, b: Outputs): boolean {
  const same = (x: Readonly<Record<string, string>>, y: Readonly<Record<string, string>>): boolean => {
    const keys = Object.keys(x);
    return keys.length === Object.keys(y).length && keys.every((key) => Object.hasOwn(y, key) && x[key] === y[key]);
  };
  return a === b || (same(a.plain, b.plain) && same(a.masked, b.masked));
}

/**
 * The names a plain `${NAME}` in `image` refers to. `$${NAME}` is an escaped literal, and a
 * reference with a default (`${TAG:-latest}`) is not counted: it never misses.
 */
export function imageNames(image: string): string[] {
  const names = new Set<string>();
  for (const match of image.matchAll(/\$\$|\$\{([\p{L}\p{N}_]+)\}/gu)) if (match[1] !== undefined) names.add(match[1]);
  return [...names];
}

/** The names of {@link imageNames} that `environment` does not have. */
export function missingImageNames(image: string, environment: Readonly<Record<string, string>>): string[] {
  return imageNames(image).filter((name) => !Object.hasOwn(environment, name));
}
