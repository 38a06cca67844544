import { BOX_PROVIDERS, type BoxProviderName } from '../boxes/registry.js';

/**
 * An `--environment` name: `host`, or a box provider's (boxes/registry.ts). Its own module, below
 * the environments themselves, so that settings (rollout/config.ts) can name one without importing
 * what runs it.
 */
export type EnvironmentName = 'host' | BoxProviderName;

/** Every environment's name, `host` first. */
export const ENVIRONMENT_NAMES: readonly EnvironmentName[] = ['host', ...(Object.keys(BOX_PROVIDERS) as BoxProviderName[])];
