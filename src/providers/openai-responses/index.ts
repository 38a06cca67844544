import type { ProviderCodec } from '../types.js';
import { renderResponsesError } from './errors.js';
import { decodeResponsesRequest } from './request.js';
import { encodeResponsesResponse } from './response.js';
import { createResponsesStream } from './stream.js';

export const openaiResponsesCodec: ProviderCodec = {
  name: 'openai-responses',
  decodeRequest: decodeResponsesRequest,
  encodeResponse: encodeResponsesResponse,
  createStream: createResponsesStream,
  renderError: renderResponsesError,
  countTokens: null,
};

export { callIdFromResponseId, responseId } from './response.js';
