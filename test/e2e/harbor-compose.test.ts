import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { polarE2e } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Harbor's multi-container shape (its examples/tasks/sidecar-artifacts: an api-server sidecar
 * built from its own folder, a healthcheck main waits for, artifacts and a collect hook taken from
 * the sidecar, a separate verifier) and the same sidecar graded in the shared mode, through `polar
 * tasks check --environment podman`. Offline: every image is built on the local debian:12-slim
 * (.ci/podman), so the sidecar is a perl server and the clients use bash's /dev/tcp. Each must be
 * valid: the oracle reaches the sidecar by name and earns 1, nop earns 0.
 */
const podman = workingEngines().includes('podman');
let dir: string;

function task(name: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    const file = path.join(dir, 'suite', name, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
}

/** An order API: POST /orders {"item": …} appends to /var/log/api/orders.log; GET /stats counts them (in memory). */
const SERVER = `use strict; use IO::Socket::INET;
my $s = IO::Socket::INET->new(LocalPort => 8000, Listen => 16, ReuseAddr => 1) or die "listen: $!";
my $n = 0;
mkdir '/var/log/api';
while (my $c = $s->accept) {
  my $line = <$c>; next unless defined $line;
  my ($method, $path) = split / /, $line;
  my $len = 0;
  while (my $h = <$c>) { last if $h =~ /^\\r?\\n$/; $len = $1 if $h =~ /^content-length:\\s*(\\d+)/i; }
  my $body = ''; read($c, $body, $len) if $len;
  my ($code, $out) = (404, '{}');
  if ($method eq 'POST' && $path eq '/orders' && $body =~ /"item"\\s*:\\s*"([^"]+)"/) {
    $n++; open my $f, '>>', '/var/log/api/orders.log' or die; print $f "$1\\n"; close $f;
    ($code, $out) = (201, '{"status": "created"}');
  } elsif ($method eq 'GET' && $path eq '/stats') { ($code, $out) = (200, "{\\"orders_received\\": $n}"); }
  print $c "HTTP/1.0 $code X\\r\\nContent-Length: " . length($out) . "\\r\\n\\r\\n$out";
  close $c;
}
`;

/** bash: `post ITEM` sends one order to the sidecar by its service name. */
const POST = `post() { exec 3<>/dev/tcp/api/8000 || exit 1; body="{\\"item\\": \\"$1\\"}"; printf 'POST /orders HTTP/1.0\\r\\nContent-Length: %d\\r\\n\\r\\n%s' "\${#body}" "$body" >&3; cat <&3; echo; exec 3<&-; }`;

const STATS = (host: string) => `exec 3<>/dev/tcp/${host}/8000 && printf 'GET /stats HTTP/1.0\\r\\n\\r\\n' >&3 && sed -n '$p' <&3`;

const COMPOSE = `services:
  main:
    depends_on:
      api:
        condition: service_healthy
  api:
    build:
      context: ./api-server
    expose:
      - "8000"
    healthcheck:
      test: ["CMD", "bash", "-c", "bash /srv/stats.sh | grep -q orders_received"]
      interval: 1s
      timeout: 5s
      retries: 30
`;

const sidecarFiles = {
  'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\n',
  'environment/docker-compose.yaml': COMPOSE,
  'environment/api-server/Dockerfile': 'FROM debian:12-slim\nCOPY server.pl stats.sh /srv/\nCMD ["perl", "/srv/server.pl"]\n',
  'environment/api-server/server.pl': SERVER,
  'environment/api-server/stats.sh': `${STATS('localhost')}\n`,
};

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-compose-'));
  const t = patientSeconds(120);
  task('sidecar-artifacts', {
    ...sidecarFiles,
    'task.toml': `version = "1.0"
artifacts = [
  { source = "/var/log/api/orders.log", service = "api" },
  { source = "/tmp/stats.json", service = "api" },
]
[verifier]
timeout_sec = ${t}.0
environment_mode = "separate"
[[verifier.collect]]
service = "api"
command = "bash /srv/stats.sh > /tmp/stats.json"
timeout_sec = 30.0
[agent]
timeout_sec = ${t}.0
`,
    'instruction.md': 'An order API runs at http://api:8000. POST three orders with distinct items to /orders.\n',
    'tests/Dockerfile': 'FROM debian:12-slim\nCOPY test.sh /tests/test.sh\n',
    'tests/test.sh': `#!/bin/bash
orders=$(sort -u /var/log/api/orders.log 2>/dev/null | wc -l)
if [ "$orders" = 3 ] && grep -q '"orders_received": 3' /tmp/stats.json; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
`,
    'solution/solve.sh': `#!/bin/bash\nset -e\n${POST}\nfor i in apple banana cherry; do post "$i"; done\n`,
  });
  task('sidecar-shared', {
    ...sidecarFiles,
    // [environment].env: set for every command in the environment, the oracle's and the verifier's.
    'task.toml': `version = "1.0"\n[verifier]\ntimeout_sec = ${t}.0\n[agent]\ntimeout_sec = ${t}.0\n[environment.env]\nORDER_ITEM = "pear"\n`,
    'instruction.md': 'An order API runs at http://api:8000. POST one order of $ORDER_ITEM to /orders and write its item to /app/item.txt.\n',
    // The verifier runs beside the same sidecar (a fresh box of main's image on its network): the
    // order the agent placed is in the sidecar's memory, not in any file the agent had.
    'tests/test.sh': `#!/bin/bash
if ${STATS('api')} | grep -q '"orders_received": 1' && [ "$(cat /app/item.txt)" = "$ORDER_ITEM" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
`,
    'solution/solve.sh': `#!/bin/bash\nset -eu\n${POST}\npost "$ORDER_ITEM"\necho "$ORDER_ITEM" > /app/item.txt\n`,
  });
});
afterAll(() => removeTree(dir));

interface Check {
  results: { task: string; verdict: string; oracle: { reward: number | null } | null; nop: { reward: number | null } | null }[];
}

describe.skipIf(!podman)(`a Harbor task's compose sidecars in podman${podman ? '' : ' (skipped: `podman info` fails here)'}`, () => {
  it(
    'the sidecar is built, healthy before the agent, reached by name; its artifacts and collect hook reach a separate verifier; [environment].env reaches every command; both tasks are valid',
    async () => {
      const r = await polarE2e(['tasks', 'check', path.join(dir, 'suite'), '--environment', 'podman', '--no-forge', '--json']);
      const check = JSON.parse(r.stdout) as Check;
      const by = new Map(check.results.map((t) => [t.task, t]));
      for (const name of ['sidecar-artifacts', 'sidecar-shared']) {
        const t = by.get(name);
        expect(t?.verdict, `${name}: ${r.stderr}\n${r.stdout}`).toBe('valid');
        expect(t?.oracle?.reward).toBe(1);
        expect(t?.nop?.reward).toBe(0);
      }
      expect(r.code).toBe(0);
    },
    patient(600_000),
  );
});
