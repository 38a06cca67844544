export { openDb, closeDb, migrate, type Db } from './db.js';
export { Store, defaultDbPath } from './store.js';
export { SessionsTable, type SessionRow, type SessionSummary, type SessionStatus, type SessionFields } from './sessions.js';
export { RequestsTable, type RequestStart, type RequestEnd, type RequestRecord, type RequestSummary, type RequestStatus } from './requests.js';
export { packUint32, unpackUint32, packFloat64, unpackFloat64 } from './tokens.js';
export { redactHeaders, redactPath, secretValues, scrubSecrets, REDACTED, SECRET_HEADERS } from './redact.js';
