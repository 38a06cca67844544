/**
 * `--thinking`: `on` / `off` send `enable_thinking: true` / `false`; `template` sends none, so the
 * template's own default (and, behind NeMo-RL's server, the recipe's
 * `http_server_serving_chat_kwargs.default_chat_template_kwargs`) decides. In trainer mode it
 * replaces the session's switch: `enable_thinking` chooses the prompt the sampled tokens are
 * conditioned on, and an agent holding its session key could otherwise flip it per call.
 */
export const THINKING_SETTINGS = ['on', 'off', 'template'] as const;
export type ThinkingSetting = (typeof THINKING_SETTINGS)[number];
