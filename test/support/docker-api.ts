import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { patient } from './patience.js';
import { removeTree } from './remove-tree.js';
import { waitUntil } from './wait.js';

/**
 * docker for the container suites where no docker daemon runs: podman's Docker-compatible API
 * (`podman system service` on a socket of its own, DOCKER_HOST pointing at it). A docker daemon that
 * answers is used as it is. `skip` says why neither works, decided when the suite is collected.
 */
export interface DockerApi {
  skip: string | null;
  /** Starts podman's service where needed and waits until `docker info` answers through it; the variables docker needs. */
  start(): Promise<NodeJS.ProcessEnv>;
  stop(): void;
}

const answers = (bin: string, args: string[], env: NodeJS.ProcessEnv = process.env): boolean => {
  try {
    execFileSync(bin, args, { stdio: 'ignore', timeout: patient(30_000), env });
    return true;
  } catch {
    return false;
  }
};

export function dockerApi(): DockerApi {
  const client = answers('docker', ['--version']);
  const daemon = client && answers('docker', ['info']);
  const podman = !daemon && client && answers('podman', ['info']);
  let service: ChildProcess | null = null;
  let dir: string | null = null;
  return {
    skip: daemon || podman ? null : client ? 'no docker daemon answers, and no working podman to serve its Docker API' : 'no docker client',
    async start() {
      if (daemon) return {};
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-docker-api-'));
      const host = `unix://${path.join(dir, 'docker.sock')}`;
      service = spawn('podman', ['system', 'service', '--time=0', host], { stdio: 'ignore' });
      const env = { ...process.env, DOCKER_HOST: host };
      // The service answers once its socket is up (a generous safety net, not a timing).
      const svc = service;
      await waitUntil(`podman system service on ${host} to answer \`docker info\``, () => answers('docker', ['info'], env), {
        stopIf: () => (svc.exitCode !== null ? `podman system service exited (${svc.exitCode})` : null),
        everyMs: 100,
        timeoutMs: 30_000,
      });
      return { DOCKER_HOST: host };
    },
    stop() {
      service?.kill('SIGTERM');
      service = null;
      if (dir) removeTree(dir);
      dir = null;
    },
  };
}
