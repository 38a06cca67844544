import { InvalidArgumentError } from 'commander';

/**
 * Numeric flags, parsed once by commander (`.argParser`), so a bad value is refused before the
 * command starts, with the same wording everywhere, and the action receives a number.
 * Exit code 2: the command was used wrongly.
 */
export function integerArg(flag: string, min: number, max: number = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isInteger(n) || n < min || n > max)
      throw invalid(`${flag} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
    return n;
  };
}

export function numberArg(flag: string, min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max)
      throw invalid(`${flag} must be a number from ${min} to ${max}, got ${JSON.stringify(value)}`);
    return n;
  };
}

/** A positive number of seconds (fractions allowed). */
export function secondsArg(flag: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw invalid(`${flag} must be a positive number of seconds, got ${JSON.stringify(value)}`);
    return n;
  };
}

/** `EVERY:DELTA`: the mock policy's planted disagreement (see mock-server/policy.ts). */
export function policyShiftArg(flag: string): (value: string) => { every: number; delta: number } {
  return (value) => {
    const m = /^(\d+):(-?\d+(?:\.\d+)?)$/.exec(value.trim());
    const every = m ? Number(m[1]) : 0;
    if (!m || every < 1)
      throw invalid(`${flag} must be EVERY:DELTA (add DELTA to the logprob at every EVERY-th position, e.g. 4:0.5), got ${JSON.stringify(value)}`);
    return { every, delta: Number(m[2]) };
  };
}

function invalid(message: string): InvalidArgumentError {
  const err = new InvalidArgumentError(message);
  err.exitCode = 2;
  return err;
}
