import { engineProvider } from './engine-cli.js';
import type { BoxProvider } from './types.js';

/** Every box provider by its `--environment` name: a new engine is one file in this folder and one line here. */
export const BOX_PROVIDERS = {
  docker: engineProvider('docker'),
  podman: engineProvider('podman'),
} satisfies Record<string, BoxProvider>;

export type BoxProviderName = keyof typeof BOX_PROVIDERS;
