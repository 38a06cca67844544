import type { Jail, SandboxLimits } from '../../sandbox/index.js';

/**
 * The box-provider layer: where a sample's processes run when they run in an image (a container of
 * an engine, a pod, a remote sandbox). A provider knows images and boxes and nothing of Harbor or of
 * rollouts; the container environment (environments/box.ts) is written against these interfaces
 * only. What every provider must do is `BoxProvider` and `Box`; what only some can do is a separate,
 * optional power (`HarnessHost`, `ProcessCount`, `BoxNetworks`), asked for where it is needed and
 * named when missing, as NeMo Gym's SandboxProvider keeps optional capabilities apart. A new engine
 * is one file in this folder and one line in registry.ts.
 */

export interface Mount {
  source: string;
  dest: string;
  readOnly: boolean;
}

/**
 * A readiness check run inside a box until it passes: Harbor's HealthcheckConfig and a compose
 * service's healthcheck alike. Defaults: 5, 30, 0, 5 seconds and 3 retries (Harbor's
 * models/task/config.py:258-278).
 */
export interface Healthcheck {
  /** A shell command; exit 0 means healthy. */
  command: string;
  intervalSec: number;
  timeoutSec: number;
  startPeriodSec: number;
  startIntervalSec: number;
  retries: number;
}

/** What a command inside a box ended with (its output's tail, bounded). */
export interface ExecResult {
  /** null: it did not run (the engine could not exec), or it was killed at the timeout. */
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** Where an image comes from: a build context (its Dockerfile), or a reference to pull or use. */
export type ImageSource =
  | {
      kind: 'build';
      /** A readable name for the image's tag (the task's name, `<task>-verifier`, `<task>-<service>`). */
      name: string;
      context: string;
      /** The Dockerfile, relative to the context; `Dockerfile` when absent. */
      dockerfile?: string;
      /** The build's own budget (Harbor's build_timeout_sec). */
      timeoutSec: number;
    }
  | { kind: 'ref'; ref: string };

/** A box's network: none (only lo), the engine's default (the internet), or a network of boxes. */
export type BoxNetwork = { kind: 'none' } | { kind: 'internet' } | { kind: 'attach'; network: string; aliases: readonly string[] };

/** One box to start. Nothing here is Harbor's: the environment translates a task into it. */
export interface BoxSpec {
  /** Unique per box and stable for its life (a sample id and its role): the provider's name derives from it. */
  id: string;
  /** An image the provider's `image()` returned. */
  image: string;
  /** Made as root right after the start; every exec's working folder. */
  workdir: string;
  network: BoxNetwork;
  mounts: readonly Mount[];
  limits: SandboxLimits;
  cpus: number | null;
  /** Variables of the box itself (a compose service's `environment`), besides what each exec passes. */
  env?: Readonly<Record<string, string>>;
  /**
   * The box's command. Absent: polar's keep-alive (`sh -c 'sleep infinity'`, Harbor's own), which
   * replaces only the image's CMD, so its ENTRYPOINT still starts the image's services. `[]`: the
   * image's own CMD (a compose service that names no command).
   */
  command?: readonly string[];
  /** Replaces the image's ENTRYPOINT ([] clears it). */
  entrypoint?: readonly string[];
  /** A fixed hostname (one GRPO group, one first prompt); the provider's default otherwise. */
  hostname?: string;
  /**
   * Run (as the image's user) until it passes before the box is handed over; the processes running
   * then (the services it waited for) are the box's own, which killStrays leaves alone. A failure
   * removes the box and rejects with why.
   */
  healthcheck?: Healthcheck;
}

/** A started box: every stage `exec`s in it until it is removed. */
export interface Box {
  /** The provider's name for it (a container's name). */
  readonly name: string;
  readonly workdir: string;
  /** Runs `bash -c COMMAND [args…]` inside with these variables (passed by name, never on an argv), as `user`. */
  shell(command: string, env: Record<string, string>, timeoutMs: number, user?: string, args?: readonly string[]): Promise<ExecResult>;
  /** Runs `sh -c SCRIPT sh [args…]` as root in `/` (polar's own checks; images without bash). */
  sh(script: string, args?: readonly string[], timeoutMs?: number): Promise<ExecResult>;
  /**
   * Stops, then kills, every process in the box but its init and what it started with (its
   * keep-alive and the image's services): what the agent left running. Returns how many.
   */
  killStrays(): Promise<number>;
  /** A host folder's contents into DEST (made first). */
  copyIn(hostDir: string, dest: string): Promise<void>;
  /** SRC's contents into a host folder (made first). */
  copyOut(src: string, hostDir: string): Promise<void>;
  /** One path, file or folder, to a host path that does not exist yet; false when SRC does not exist inside. */
  copyPathOut(src: string, hostPath: string): Promise<boolean>;
  /** A host file or folder to DEST inside, which must not exist (its parent must). */
  copyPathIn(hostPath: string, dest: string): Promise<void>;
  remove(): Promise<void>;
}

/** Optional power: the harness runs inside the box (behind the proxy bridge when `proxyPort` is given). */
export interface HarnessHost {
  jail(proxyPort: number | null, user?: string): Jail;
}

/** Optional power: the box's process count and cap, read from outside (a box at its cap starts nothing). */
export interface ProcessCount {
  processes(): Promise<{ current: number; cap: number } | null>;
}

/** Optional power of a provider: networks joining boxes by name (compose services, sidecars). */
export interface BoxNetworks {
  /** A new network; `internal`: the boxes on it reach each other and nothing else. Returns its name. */
  create(id: string, internal: boolean): Promise<string>;
  remove(name: string): Promise<void>;
}

export interface BoxProvider {
  /** Its `--environment` name. */
  readonly name: string;
  /** null where it can start boxes here, else why not (`podman info` fails). Asked once per run. */
  probe(): string | null;
  /** The image for a source, built or found once per content and process; its failure is every caller's. */
  image(source: ImageSource, onNotice: (line: string) => void): Promise<string>;
  /** An image's WORKDIR (`/` when it sets none). */
  imageWorkdir(image: string): Promise<string>;
  /** Starts a box; on failure nothing of it is left. */
  start(spec: BoxSpec): Promise<Box & Partial<HarnessHost & ProcessCount>>;
  readonly networks?: BoxNetworks;
}

/** The box, if it can host the harness; else a message naming the provider and the missing power. */
export function harnessHost(provider: BoxProvider, box: Box & Partial<HarnessHost>): HarnessHost | string {
  return box.jail ? { jail: box.jail.bind(box) } : `the ${provider.name} provider cannot run a harness inside its boxes (no HarnessHost)`;
}
