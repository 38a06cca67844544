import { PolarError } from '../core/errors.js';

/** Anything thrown inside a call, as a PolarError; an aborted call is always reported as such. */
export function toPolarError(err: unknown, signal?: AbortSignal): PolarError {
  if (signal?.aborted) return new PolarError('POLAR_CLIENT_ABORTED', 'harness disconnected', 499, { cause: err });
  if (err instanceof PolarError) return err;
  return new PolarError('POLAR_INTERNAL', `internal error: ${(err as Error)?.message ?? String(err)}`, 500, {
    cause: err,
  });
}
