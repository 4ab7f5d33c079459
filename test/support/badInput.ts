/**
 * What the generated bad-input cases (test/platform/badInput.test.ts) and the fuzz run stand on, one
 * file per job under badInput/: raw HTTP calls and the error-body assertion (http.ts), calls with the
 * fixture's headers (calls.ts), the fixture workspace built from the catalogue and the namespaces'
 * kits (fixture.ts), records from the document's examples (records.ts), the "nothing was stored"
 * snapshot (stored.ts), the cases (cases.ts), running them (runner.ts) and real and edited cursors
 * (cursors.ts). Nothing here names an operation, a field or a module.
 */
export { BROWSER_UA, call, headersFor } from './badInput/calls.ts';
export { authCases, type CaseGroups, casesOf, type HttpCase, routeCases } from './badInput/cases.ts';
export { cursorEdits, fieldsOf, openCursor, type RealCursor, realCursors, reseal } from './badInput/cursors.ts';
export { baseBody, type Fixture, makeFixture } from './badInput/fixture.ts';
export { assertErrorBody, assertErrorShape, ERROR_CODES, type HeaderPatch, type RawResponse, send } from './badInput/http.ts';
export { createRecords, recordsFor } from './badInput/records.ts';
export { assertNoProblems, pool, runCases } from './badInput/runner.ts';
export { stateDiff, storedState } from './badInput/stored.ts';
