/**
 * What an agent holding its session key can send to choose its own tokens or its own prompt
 * (`n > 1` the codecs refuse already): its own sampling numbers, token bans and biases, guided
 * decoding, beam search, ignore_eos, a chat template, a priority. The sampling-policy tests send it
 * at each layer (the policy on a request, a rollout through the CLI), each adding its own fields.
 */
export const SAMPLING_ATTACK: Record<string, unknown> = {
  temperature: 0.2,
  top_p: 0.5,
  top_k: 5,
  min_p: 0.3,
  min_tokens: 40,
  seed: 7,
  logit_bias: { '1234': 100 },
  allowed_token_ids: [1, 2, 3],
  bad_words: ['no'],
  guided_regex: 'yes|no',
  structured_outputs: { regex: 'yes' },
  response_format: { type: 'json_object' },
  use_beam_search: true,
  best_of: 4,
  ignore_eos: true,
  truncate_prompt_tokens: 10,
  vllm_xargs: { a: 1 },
  chat_template: '{{ messages }}',
  continue_final_message: true,
  add_generation_prompt: false,
  priority: -100,
  tool_choice: 'required',
};
