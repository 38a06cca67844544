import type { RolloutTask } from '../task-file.js';
import { NO_NETWORK_HINT } from '../harbor/network-hint.js';
import { topReward } from '../harbor/trial.js';
import { DEFAULT_REWARD_RANGE, OUT_OF_RANGE, type RewardRange, rangeText } from '../reward-range.js';
import { notAsWritten } from './as-written.js';
import { NOT_IMPLEMENTED } from '../multi-step.js';
import type { EnvironmentName } from '../environments/names.js';

/**
 * A task's verdict in `polar tasks check`, each word meaning one thing. `broken` only where the
 * evidence of a run of the task as written says it is wrong (its oracle ran and missed its top
 * reward, nop earned, a forgery won); `unsupported` where polar does not implement a Harbor feature
 * it needs yet (named: as-written.ts); `unverifiable` where this
 * machine could not tell (no image, no network, a start that failed for the machine's reason, a
 * Harbor feature this environment does not run, a JSONL task without "solution"), each with its
 * reason and the way out. (`invalid`, a task that does not load, is decided before anything runs:
 * load.ts.) Harbor task folders and JSONL tasks alike; the network reasons are Harbor's alone (a
 * JSONL evaluator never has the network).
 */
export type Verdict = 'valid' | 'broken' | 'unverifiable' | 'unsupported';

/** One built-in agent's sample, as far as the verdict needs it. */
export interface RunEvidence {
  outcome: string;
  reward: number | null;
  error: string | null;
  /** init: before the agent ran; run: the agent; post: the verifier. */
  errorStage: string | null;
  /** Why the verifier's run scored 0 without a verdict (killed, timed out, no reward). */
  forfeit: string | null;
  output: string | null;
  /** The tails of what the verifier wrote under /logs/verifier (evaluators/verifier-files.ts). */
  verifierFiles: Record<string, string> | null;
  /** The verifier's metrics, when it reported several and none is the reward without --reward-key. */
  needsRewardKey: string[] | null;
}

export interface VerdictContext {
  environment: EnvironmentName;
  /** The verifier's network in this run (rollout/sandboxing.ts verifierNetwork). */
  verifierNetwork: 'host' | 'none';
  /** The rewards the run took (`--reward-range`; absent: [0, 1], reward-range.ts). */
  rewardRange?: RewardRange;
}

export interface TaskVerdict {
  verdict: Verdict;
  /** What is wrong with the task (broken). */
  problems: string[];
  /** Why it could not be checked here, each with the way out. */
  unverifiable: string[];
  /** The Harbor features it needs that polar does not implement yet, by name. */
  unsupported: string[];
  /** polar ran it as written: what its runs showed is evidence (else none of it makes it broken). */
  asWritten: boolean;
}

/**
 * The verdict from all that was found (check.ts adds the forgeries' problems). A task not run as
 * written is never broken: what its runs showed is kept, as said of a run otherwise.
 */
/** A forgery's problem (check.ts): `hackable: forge:…` or `escapes its group: forge:…`. */
const isForgery = (p: string): boolean => /^(hackable|escapes its group): forge:/.test(p);

export function settleVerdict(v: Omit<TaskVerdict, 'verdict'>): TaskVerdict {
  if (!v.asWritten) {
    // A forgery that won, or a forger that escaped its group, did so the way training runs the task
    // here too: that stays broken. The rest (the oracle missed, nop earned) is no evidence.
    const forged = v.problems.filter(isForgery);
    const seen = v.problems.filter((p) => !isForgery(p)).map((p) => `seen on a run not as written, so no evidence: ${p}`);
    const rest = { ...v, problems: forged, unverifiable: [...v.unverifiable, ...seen] };
    return { ...rest, verdict: forged.length > 0 ? 'broken' : v.unsupported.length > 0 ? 'unsupported' : 'unverifiable' };
  }
  const verdict = v.problems.length > 0 ? 'broken' : v.unsupported.length > 0 ? 'unsupported' : v.unverifiable.length > 0 ? 'unverifiable' : 'valid';
  return { ...v, verdict };
}

/**
 * The prefix a Harbor feature this environment cannot run says itself with (a StageError's message
 * from the environment), so that the task is `unverifiable` here rather than `broken`:
 * `${what}: ${UNSUPPORTED_HERE} (${way out})`.
 */
export const UNSUPPORTED_HERE = 'not supported on this environment';

/** The oracle's outcome for a JSONL task without "solution": it was not run (check.ts). */
export const NO_SOLUTION = 'no-solution';

/** A failure caused by the machine, not the task: say it with the way out. */
const NETWORK =
  /temporary failure in name resolution|name or service not known|could not resolve host|temporary failure resolving|getaddrinfo|EAI_AGAIN|ENOTFOUND|network is unreachable|no route to host|failed to establish a new connection|NewConnectionError|dial tcp|no such host|are you offline|dns error|ConnectTimeout|Could not fetch URL/i;
/** An executable, or a Python tool module run with -m, that this machine does not have. */
const MISSING_TOOL = /(command not found|^\S*sh: \d+: \S+: not found$|python[\d.]*: No module named \S+)/m;
const PULL =
  /pull|pinging container registry|initializing source|failed to resolve (source metadata|reference)|manifest unknown|requested access to the resource is denied|no such host|dial tcp|TLS handshake timeout|i\/o timeout/i;

/** The verdict on one task from its oracle's and nop's runs and the forgeries that won (check.ts). */
export function judgeTask(task: RolloutTask, oracle: RunEvidence, nop: RunEvidence, ctx: VerdictContext): TaskVerdict {
  const gaps = notAsWritten(task, ctx.environment);
  const problems: string[] = [];
  const unverifiable: string[] = [...gaps.unverifiable];
  const unsupported: string[] = [...gaps.unsupported];
  const say = (r: Reason | null) => {
    // A refusal of what polar does not implement yet: named from the task already where it could be.
    if (r?.polar) {
      if (unsupported.length === 0) unsupported.push(r.text);
    } else if (r) (r.task ? problems : unverifiable).push(r.text);
  };
  const oStart = oracle.errorStage === 'init' ? startFailure(oracle.error, task) : null;
  const nStart = nop.errorStage === 'init' ? startFailure(nop.error, task) : null;
  if (oStart && nStart && oStart.text === nStart.text) say({ ...oStart, text: `neither the oracle nor nop could start: ${oStart.text}` });
  else {
    if (oStart) say({ ...oStart, text: `the oracle could not start: ${oStart.text}` });
    if (nStart) say({ ...nStart, text: `nop could not start: ${nStart.text}` });
  }
  // Several metrics and no "reward": Harbor's own shape (each key a metric); the rollout must be told which is the reward.
  const metrics = (!oStart ? oracle.needsRewardKey : null) ?? (!nStart ? nop.needsRewardKey : null);
  if (metrics)
    say({
      task: false,
      text: `its verifier reports several metrics (${metrics.join(', ')}) and no "reward": pass --reward-key NAME to say which is the reward`,
    });
  else if (oracle.outcome === NO_SOLUTION)
    // Nothing shows the top reward reachable: the task may still be broken by nop or a forgery.
    say({ task: false, text: `${oracle.error ?? 'no solution'}: the oracle cannot run (add "solution": [commands…] to check the task)` });
  else if (!oStart) say(oracleReason(task, oracle, ctx));
  if (!nStart) {
    if (nop.reward !== null && nop.reward > 0) problems.push(`doing nothing (nop) already earns ${nop.reward}`);
    else if (nop.outcome === 'error')
      say({ task: false, text: `the verifier could not run on the untouched workspace (nop): ${firstLine(nop.error) ?? 'error'}` });
  }
  const asWritten = gaps.unverifiable.length + gaps.unsupported.length === 0;
  return settleVerdict({ problems, unverifiable, unsupported, asWritten });
}

interface Reason {
  /** The task's own fault (broken), not the machine's (unverifiable). */
  task: boolean;
  text: string;
  /** What polar does not implement yet (unsupported). */
  polar?: true;
}

/** Why a run ended before its agent started (stage init). */
function startFailure(error: string | null, task: RolloutTask): Reason {
  const line = firstLine(error) ?? 'no error recorded';
  const build = /\b(docker|podman) build of .* failed \(exit [^)]*\):\s*(.*)$/.exec(line);
  if (build) {
    const engine = build[1]!;
    const cause = build[2]!.replace(/\s*\(--environment host runs[^)]*\)\s*$/, '');
    if (PULL.test(cause)) {
      const image = /docker:\/\/([^\s:]+(?::[\w.-]+)?)/.exec(cause)?.[1] ?? task.harbor?.baseImage ?? 'its base image';
      return {
        task: false,
        text: `no network to pull ${image} (${engine}: ${cause}); \`${engine} pull ${image}\` where its registry answers (or \`${engine} load\` a saved copy), or --environment host`,
      };
    }
    return {
      task: false,
      text: `its image does not build here (${engine}: ${cause}); build it where its RUN steps have what they need (a download needs the network), or --environment host`,
    };
  }
  if (line.includes(NOT_IMPLEMENTED)) return { task: false, text: line, polar: true };
  if (line.includes(UNSUPPORTED_HERE)) return { task: false, text: line };
  // A Harbor feature only the task's container runs (a healthcheck, the image's ENTRYPOINT): features.ts hostRefusal.
  if (/needs a container engine/.test(line)) return { task: false, text: `${line} (${UNSUPPORTED_HERE})` };
  // The task names a user its own image does not have: nothing this machine can change.
  if (/is not a user in the image/.test(line)) return { task: true, text: line };
  // INIT's own budget (stages.ts preparationMs): a Harbor task's build_timeout_sec, a JSONL task's timeout.
  if (/preparing the workspace ran past its budget|ran past the workspace's preparation budget/.test(line))
    return { task: false, text: `${line} (task.toml's [environment].build_timeout_sec, or a JSONL task's timeout): raise it, or prepare on a faster machine` };
  if (/the host environment copies only/.test(line))
    return { task: false, text: `${line}; --environment podman or docker builds the image instead (${UNSUPPORTED_HERE})` };
  return { task: false, text: `${line} (this machine's reason, not the task's)` };
}

/** Whether the oracle's run shows the task wrong, the machine short of something, or neither. */
function oracleReason(task: RolloutTask, oracle: RunEvidence, ctx: VerdictContext): Reason | null {
  const top = topReward(task.metadata);
  // A task scored on another scale than the run's range (reward-range.ts): every sample of it would
  // forfeit, the oracle's too. Not the task's fault, nor something it can show: say the flag.
  const range = ctx.rewardRange ?? DEFAULT_REWARD_RANGE;
  if (top > range[1])
    return {
      task: false,
      text: `its top reward ([metadata].max_reward) ${top} is above the reward range ${rangeText(range)}: pass --reward-range ${range[0]},${top} (or the task's own scale) to check it`,
    };
  if (oracle.forfeit?.includes(OUT_OF_RANGE))
    return {
      task: false,
      text: `its verifier scores outside the reward range ${rangeText(range)} (the oracle: ${oracle.forfeit}): pass --reward-range LO,HI with the task's scale`,
    };
  if (oracle.outcome === 'error' && oracle.errorStage === 'post')
    return { task: false, text: `the verifier could not run here: ${firstLine(oracle.error) ?? 'error'}` };
  if (oracle.outcome === 'error' && /has no solution\/ for the oracle/.test(oracle.error ?? ''))
    return { task: false, text: `${firstLine(oracle.error)}: the oracle cannot run (add solution/solve.sh to check the task)` };
  // solve.sh failing is not an error (the verifier grades what it left): an error while the oracle
  // ran is polar's or the engine's (an exec that failed, a [solution].env variable not set here).
  if (oracle.outcome === 'error' && oracle.errorStage === 'run')
    return { task: false, text: `the oracle could not run here: ${firstLine(oracle.error) ?? 'error'}` };
  const missed = oracle.outcome !== 'error' && oracle.reward !== null && oracle.reward < top;
  if (!missed && oracle.outcome !== 'error' && oracle.reward !== null) return null;
  const evidence = [oracle.output ?? '', ...Object.values(oracle.verifierFiles ?? {})].join('\n');
  const offline = ctx.verifierNetwork === 'none' && task.harbor?.verifierNetwork === null;
  const net = matchedLine(evidence, NETWORK);
  const timedOut = oracle.forfeit !== null && /timed out/.test(oracle.forfeit);
  if (offline && (net || timedOut))
    return {
      task: false,
      text: `its verifier needs the network (${net ? `"${net}"` : oracle.forfeit}): ${NO_NETWORK_HINT}`,
    };
  if (net && ctx.verifierNetwork === 'host')
    return { task: false, text: `its verifier could not reach the network from this machine ("${net}"); run it where the internet is reachable` };
  const tool = ctx.environment === 'host' ? matchedLine(evidence, MISSING_TOOL) : null;
  if (tool)
    return {
      task: false,
      text: task.harbor
        ? `its verifier lacks a tool on this machine ("${tool}"): the host environment runs with this machine's tools, not ${task.harbor.baseImage ?? 'the image'}'s (${UNSUPPORTED_HERE}); --environment podman or docker builds the image`
        : `its evaluator lacks a tool on this machine ("${tool}"): a JSONL task runs with this machine's tools; install it here`,
    };
  const hint = offline ? ` (${NO_NETWORK_HINT})` : '';
  if (oracle.outcome === 'error' || oracle.reward === null)
    return { task: true, text: `the oracle ended in ${oracle.outcome}${oracle.error ? `: ${firstLine(oracle.error)}` : ''}${hint}` };
  const why = oracle.forfeit ? ` (scored 0: ${oracle.forfeit})` : '';
  const solution = task.harbor ? 'solution/solve.sh' : 'the task\'s "solution"';
  return { task: true, text: `the oracle (${solution}) earned ${oracle.reward}, not the top reward ${top}${why}${hint}` };
}

function firstLine(text: string | null): string | null {
  return text?.split('\n')[0] ?? null;
}

/** The last line of text that matches, trimmed and bounded: the evidence quoted. */
function matchedLine(text: string, re: RegExp): string | null {
  const lines = text.split('\n').filter((l) => re.test(l));
  const last = lines.at(-1)?.trim();
  if (!last) return null;
  return last.length > 160 ? `${last.slice(0, 159)}…` : last;
}
