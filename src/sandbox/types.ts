/** `bwrap`: bubblewrap with the minimal file-system view, own namespaces and limits. `none`: commands run as they are. */
export type SandboxKind = 'bwrap' | 'none';

/**
 * What a sandboxed command may reach over the network. `proxy-only`: its own network namespace whose
 * one way out is the capture proxy, bridged to 127.0.0.1:<the proxy's port>. `host`: the machine's
 * network (opt-in). `none`: its own namespace with nothing in it (evaluators).
 */
export type NetworkMode = 'proxy-only' | 'host' | 'none';

/** The program behind a `proxy-only` sandbox's bridge (bridge.ts). */
export type ForwarderKind = 'perl' | 'node';

/** Per-sample caps. 0 means no cap. */
export interface SandboxLimits {
  /** Processes and threads at once (cgroup pids.max). */
  maxProcs: number;
  /** Bytes of memory for the whole sample (cgroup memory limit). */
  maxMemoryBytes: number;
  /** Bytes one file may grow to (RLIMIT_FSIZE). */
  maxFileSizeBytes: number;
  /** CPU seconds for the whole sample (cgroup cpuacct), per process (RLIMIT_CPU) without cgroups. */
  maxCpuSeconds: number;
}

/** How a process (rollout, run, worker, gym-agent) sandboxes every command a model wrote or a task gave. */
export interface SandboxSettings {
  kind: SandboxKind;
  /** The bubblewrap binary (with `bwrap`). */
  bwrap: string;
  /** The harness's network; evaluators always get `none`, setup commands their task's choice. */
  network: Exclude<NetworkMode, 'none'>;
  limits: SandboxLimits;
  /** Paths mounted read-only besides the minimal view (a custom harness's script, `--sandbox-ro`). */
  extraReadOnly: readonly string[];
  /**
   * The program that forwards the proxy's port in a `proxy-only` sandbox (bridge.ts): left out, Perl
   * where the host has it, else Node; `node` forces Node (the start-up bench compares the two).
   */
  forwarder?: ForwarderKind;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  // Counts threads: Node alone runs about 11 per process.
  maxProcs: 1024,
  maxMemoryBytes: 4 * 1024 ** 3,
  maxFileSizeBytes: 1024 ** 3,
  maxCpuSeconds: 3600,
};
