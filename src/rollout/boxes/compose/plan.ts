import type { Healthcheck } from '../types.js';

/**
 * A task's environment/docker-compose.yaml as polar runs it (parse.ts reads it, order.ts orders it,
 * run.ts starts it). Harbor runs the file merged over its own base, whose `main` service is the
 * agent's container (src/harbor/environments/docker/docker.py:232-285, src/harbor/environments/docker/docker-compose-build.yaml:1-6);
 * the other services are sidecars, reached from `main` by their service names.
 */
export interface ComposePlan {
  /** The sidecars, in the file's order (never `main`). */
  services: ComposeService[];
  /** What the file sets on `main`, to be applied to the agent's box by its starter. */
  main: MainOverrides;
  /** The one network every service and `main` join. */
  network: ComposeNetwork;
  /** Lines for the user: what the file asks that polar leaves out on purpose (published ports…). */
  notices: string[];
}

/** How a service waits for another (compose-spec `depends_on.condition`). */
export type DependsCondition = 'service_started' | 'service_healthy' | 'service_completed_successfully';

export interface DependsOn {
  service: string;
  condition: DependsCondition;
}

export type ComposeImage = { kind: 'build'; context: string; dockerfile?: string } | { kind: 'ref'; ref: string };

export interface ComposeService {
  name: string;
  /** `build` wins over `image` (Harbor builds before `up`, src/harbor/environments/docker/docker.py:529-536); `context` is absolute. */
  image: ComposeImage;
  /** The box's own variables (`environment`, list or map form), interpolated. */
  env: Record<string, string>;
  /** argv; absent: the image's CMD (polar keeps the service's own process). */
  command?: string[];
  /** argv; [] clears the image's ENTRYPOINT; absent: the image's. */
  entrypoint?: string[];
  /** `working_dir`; absent: the image's WORKDIR. */
  workingDir?: string;
  hostname?: string;
  /** null: none, or `test: [NONE]` / `disable: true`. */
  healthcheck: Healthcheck | null;
  dependsOn: DependsOn[];
  /** Network aliases besides the service's name. */
  aliases: string[];
}

/** Keys of the task's `main` service, merged over Harbor's base as compose merges files. */
export interface MainOverrides {
  dependsOn: DependsOn[];
  env: Record<string, string>;
  command?: string[];
  entrypoint?: string[];
  workingDir?: string;
  user?: string;
  healthcheck: Healthcheck | null;
  aliases: string[];
}

export interface ComposeNetwork {
  /** The network's name in the file (`default` unless services name one). */
  name: string;
  /** The file's `internal: true`: no outside access even when the task has the internet. */
  internal: boolean;
}
