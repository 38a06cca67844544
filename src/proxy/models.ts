/** The model list in the shape each SDK expects: OpenAI and Anthropic share one, Google has its own. */
export function modelList(served: string | null, flavor: 'openai' | 'google'): unknown {
  const id = served ?? 'polar';
  if (flavor === 'google') {
    return { models: [{ name: `models/${id}`, displayName: id, supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'] }] };
  }
  return {
    object: 'list',
    data: [{ id, object: 'model', type: 'model', display_name: id, created: 0, created_at: '1970-01-01T00:00:00Z', owned_by: 'polar' }],
    has_more: false,
    first_id: id,
    last_id: id,
  };
}
