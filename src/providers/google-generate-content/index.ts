import type { ProviderCodec } from '../types.js';
import { renderGeminiError } from './errors.js';
import { decodeGeminiRequest } from './request.js';
import { encodeGeminiResponse } from './response.js';
import { createGeminiStream } from './stream.js';

export const googleGenerateContentCodec: ProviderCodec = {
  name: 'google-generate-content',
  decodeRequest: decodeGeminiRequest,
  encodeResponse: encodeGeminiResponse,
  createStream: createGeminiStream,
  renderError: renderGeminiError,
};
