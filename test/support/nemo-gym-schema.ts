/**
 * NeMo Gym's validation of an agent's `/run` result, written from its models (Gym `07d6b0d`,
 * `nemo_gym/openai_utils.py` and `base_resources_server.py`; field list in
 * ../shared/reference/nemo-rl.md §6), and NeMo-RL's contiguity assert
 * (`nemo_rl/environments/nemo_gym.py::_postprocess_nemo_gym_to_nemo_rl_result`). Returns every
 * problem found, as `path: what`; an empty list means Gym and NeMo-RL would accept the line.
 */

type Json = Record<string, unknown>;

/** `NeMoGymResponseCreateParamsNonStreaming` forbids extra keys. */
const CREATE_PARAMS_KEYS = new Set([
  'background',
  'include',
  'input',
  'instructions',
  'max_output_tokens',
  'max_tool_calls',
  'metadata',
  'model',
  'parallel_tool_calls',
  'previous_response_id',
  'prompt',
  'reasoning',
  'service_tier',
  'store',
  'temperature',
  'text',
  'tool_choice',
  'tools',
  'top_logprobs',
  'top_p',
  'truncation',
  'user',
  'stream',
]);
const TOKEN_FIELDS = ['prompt_token_ids', 'generation_token_ids', 'generation_log_probs'] as const;
const STATUSES = new Set(['in_progress', 'completed', 'incomplete']);

export function gymResultProblems(line: unknown): string[] {
  const problems: string[] = [];
  const p = (path: string, what: string) => problems.push(`${path}: ${what}`);
  if (!isObj(line)) return ['result: not an object'];
  if (typeof line.reward !== 'number' || !Number.isFinite(line.reward)) p('reward', 'must be a finite float');
  const params = line.responses_create_params;
  if (!isObj(params)) p('responses_create_params', 'missing');
  else {
    for (const key of Object.keys(params)) if (!CREATE_PARAMS_KEYS.has(key)) p(`responses_create_params.${key}`, 'extra key (forbidden)');
    if (typeof params.input !== 'string') {
      if (!Array.isArray(params.input)) p('responses_create_params.input', 'must be a string or a list of items');
      else params.input.forEach((item, i) => itemProblems(item, `responses_create_params.input[${i}]`, p));
    }
    if (params.tools !== undefined) {
      if (!Array.isArray(params.tools)) p('responses_create_params.tools', 'must be a list');
      else params.tools.forEach((tool, i) => toolProblems(tool, `responses_create_params.tools[${i}]`, p));
    }
  }
  const response = line.response;
  if (!isObj(response)) p('response', 'missing');
  else {
    if (typeof response.id !== 'string') p('response.id', 'required string');
    if (typeof response.created_at !== 'number') p('response.created_at', 'required number');
    if (typeof response.model !== 'string') p('response.model', 'required string');
    if (response.object !== 'response') p('response.object', "must be 'response'");
    if (typeof response.parallel_tool_calls !== 'boolean') p('response.parallel_tool_calls', 'required bool');
    if (response.tool_choice === undefined) p('response.tool_choice', 'required');
    if (!Array.isArray(response.tools)) p('response.tools', 'required list');
    else response.tools.forEach((tool, i) => toolProblems(tool, `response.tools[${i}]`, p));
    if (response.status !== undefined && !['completed', 'failed', 'in_progress', 'cancelled', 'queued', 'incomplete'].includes(String(response.status)))
      p('response.status', 'not a response status');
    if (response.usage !== undefined && response.usage !== null) usageProblems(response.usage, p);
    if (!Array.isArray(response.output)) p('response.output', 'required list');
    else {
      response.output.forEach((item, i) => {
        if (isObj(item) && !('type' in item)) p(`response.output[${i}]`, 'output items must include a type discriminator');
        itemProblems(item, `response.output[${i}]`, p);
      });
      if (!response.output.some((o) => isObj(o) && Array.isArray(o.generation_token_ids) && o.generation_token_ids.length > 0)) {
        p('response.output', 'no item carries generation data (NeMo-RL raises ValueError)');
      }
    }
  }
  const ic = line.instance_config;
  if (ic !== undefined && (!isObj(ic) || (ic.mask_sample !== undefined && typeof ic.mask_sample !== 'boolean')))
    p('instance_config', 'must be {mask_sample: bool}');
  return problems;
}

/**
 * NeMo-RL's rule: walking the output, every item with non-empty `generation_token_ids` must have
 * the tokens so far (previous prompt + generation) as a prefix of its `prompt_token_ids`.
 */
export function contiguityProblems(line: unknown): string[] {
  const output = isObj(line) && isObj(line.response) && Array.isArray(line.response.output) ? line.response.output : [];
  const problems: string[] = [];
  let seen: number[] = [];
  output.forEach((item, i) => {
    if (!isObj(item) || !Array.isArray(item.generation_token_ids) || item.generation_token_ids.length === 0) return;
    const prompt = item.prompt_token_ids as number[];
    if (prompt.length < seen.length || seen.some((id, k) => prompt[k] !== id)) problems.push(`response.output[${i}]: Non-contiguous messages found!`);
    seen = [...prompt, ...(item.generation_token_ids as number[])];
  });
  return problems;
}

function itemProblems(item: unknown, path: string, p: (path: string, what: string) => void): void {
  if (!isObj(item)) {
    p(path, 'not an object');
    return;
  }
  const present = TOKEN_FIELDS.filter((f) => f in item);
  if (present.length > 0 && present.length < 3)
    p(path, `Token metadata must include all required fields; missing: ${TOKEN_FIELDS.filter((f) => !(f in item)).join(', ')}`);
  if (present.length === 3) {
    if (!intList(item.prompt_token_ids) || !intList(item.generation_token_ids)) p(path, 'token ids must be lists of ints');
    if (!Array.isArray(item.generation_log_probs) || item.generation_log_probs.some((x) => typeof x !== 'number' || Number.isNaN(x)))
      p(path, 'generation_log_probs must be floats (NaN raises)');
    if (
      present.length === 3 &&
      Array.isArray(item.generation_log_probs) &&
      Array.isArray(item.generation_token_ids) &&
      item.generation_log_probs.length !== item.generation_token_ids.length
    )
      p(path, 'one logprob per generated token');
    if (!['message', 'function_call', 'reasoning'].includes(String(item.type))) p(path, `${String(item.type)} has no ForTraining variant`);
  }
  const type = item.type ?? 'message';
  if (type === 'message') {
    if (!['user', 'assistant', 'system', 'developer'].includes(String(item.role))) p(`${path}.role`, 'user | assistant | system | developer');
    if (typeof item.content === 'string') return;
    if (!Array.isArray(item.content)) {
      p(`${path}.content`, 'string or list of parts');
      return;
    }
    const output = item.content.some((c) => isObj(c) && (c.type === 'output_text' || c.type === 'refusal'));
    if (output) {
      if (item.role !== 'assistant') p(path, 'output_text parts belong to assistant messages');
      if (typeof item.id !== 'string') p(`${path}.id`, 'an output message needs an id');
      if (item.status !== undefined && !STATUSES.has(String(item.status))) p(`${path}.status`, 'bad status');
      item.content.forEach((c, k) => {
        if (!isObj(c) || (c.type === 'output_text' && (typeof c.text !== 'string' || !Array.isArray(c.annotations))))
          p(`${path}.content[${k}]`, 'output_text needs text and annotations');
      });
    } else {
      item.content.forEach((c, k) => {
        if (!isObj(c) || !['input_text', 'input_image', 'input_file'].includes(String(c.type)))
          p(`${path}.content[${k}]`, 'input_text | input_image | input_file');
        else if (c.type === 'input_text' && typeof c.text !== 'string') p(`${path}.content[${k}].text`, 'required string');
      });
    }
  } else if (type === 'function_call') {
    for (const f of ['arguments', 'call_id', 'name']) if (typeof item[f] !== 'string') p(`${path}.${f}`, 'required string');
    if (item.status !== undefined && item.status !== null && !STATUSES.has(String(item.status))) p(`${path}.status`, 'bad status');
  } else if (type === 'function_call_output') {
    if (typeof item.call_id !== 'string') p(`${path}.call_id`, 'required string');
    if (typeof item.output !== 'string' && !Array.isArray(item.output)) p(`${path}.output`, 'string or list');
  } else if (type === 'reasoning') {
    if (typeof item.id !== 'string') p(`${path}.id`, 'required string');
    if (!Array.isArray(item.summary) || item.summary.some((s) => !isObj(s) || typeof s.text !== 'string' || s.type !== 'summary_text'))
      p(`${path}.summary`, 'list of {type: summary_text, text}');
  } else {
    p(`${path}.type`, `${String(type)} is not an item polar should emit`);
  }
}

function toolProblems(tool: unknown, path: string, p: (path: string, what: string) => void): void {
  // FunctionToolParam: name, parameters, strict and type are Required keys.
  if (!isObj(tool)) {
    p(path, 'not an object');
    return;
  }
  if (tool.type !== 'function') p(`${path}.type`, "must be 'function'");
  if (typeof tool.name !== 'string') p(`${path}.name`, 'required string');
  if (!('parameters' in tool) || (tool.parameters !== null && !isObj(tool.parameters))) p(`${path}.parameters`, 'required object or null');
  if (!('strict' in tool) || (tool.strict !== null && typeof tool.strict !== 'boolean')) p(`${path}.strict`, 'required bool or null');
}

function usageProblems(usage: unknown, p: (path: string, what: string) => void): void {
  if (!isObj(usage)) {
    p('response.usage', 'object');
    return;
  }
  for (const f of ['input_tokens', 'output_tokens', 'total_tokens']) if (!Number.isInteger(usage[f])) p(`response.usage.${f}`, 'required int');
  if (!isObj(usage.input_tokens_details) || !Number.isInteger(usage.input_tokens_details.cached_tokens))
    p('response.usage.input_tokens_details.cached_tokens', 'required int');
  if (!isObj(usage.output_tokens_details) || !Number.isInteger(usage.output_tokens_details.reasoning_tokens))
    p('response.usage.output_tokens_details.reasoning_tokens', 'required int');
}

function intList(v: unknown): boolean {
  return Array.isArray(v) && v.every((x) => Number.isInteger(x));
}

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
