/**
 * The Gemini API `generateContent` wire fields polar reads or writes (ai.google.dev, "Generating
 * content" and the REST reference). Everything else passes unread.
 */
export interface GeminiPart {
  text?: string;
  thought?: boolean;
  thoughtSignature?: string;
  functionCall?: { id?: string; name: string; args?: Record<string, unknown> };
  functionResponse?: { id?: string; name: string; response?: unknown };
  inlineData?: { mimeType: string; data: string };
  fileData?: { mimeType?: string; fileUri: string };
  [extra: string]: unknown;
}

export interface GeminiContent {
  role?: string;
  parts?: GeminiPart[];
}

export interface GeminiRequest {
  contents: GeminiContent[];
  systemInstruction?: GeminiContent | string;
  tools?: { functionDeclarations?: { name: string; description?: string; parameters?: unknown; parametersJsonSchema?: unknown }[]; [k: string]: unknown }[];
  toolConfig?: { functionCallingConfig?: { mode?: string; allowedFunctionNames?: string[] } };
  generationConfig?: {
    maxOutputTokens?: number;
    temperature?: number;
    topP?: number;
    topK?: number;
    stopSequences?: string[];
    candidateCount?: number;
    seed?: number;
    presencePenalty?: number;
    frequencyPenalty?: number;
    responseMimeType?: string;
    responseSchema?: unknown;
    responseJsonSchema?: unknown;
    thinkingConfig?: { includeThoughts?: boolean; thinkingBudget?: number; thinkingLevel?: string };
    [k: string]: unknown;
  };
  [extra: string]: unknown;
}

export interface GeminiCodecState {
  /** Thought parts go back to the caller only when it asked for them (`includeThoughts`). */
  includeThoughts: boolean;
}
