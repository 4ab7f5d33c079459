/** U+202A–U+202E and U+2066–U+2069: the characters display text may not contain. */
export declare const BIDI_CONTROLS: RegExp;
/** The OpenAPI `format` of a string a person reads (`display-text`). */
export declare const DISPLAY_TEXT_FORMAT: 'display-text';
/** The rule as a JSON Schema `pattern` (`^[^\u202A-\u202E\u2066-\u2069]*$`), for validators that do not know the format. */
export declare const DISPLAY_TEXT_PATTERN: string;
/** Whether `value` keeps the display-text rule (no bidi embedding, override or isolate control). */
export declare function isDisplayText(value: string): boolean;
/** The first refused control of `value` as `U+202E RIGHT-TO-LEFT OVERRIDE`, or null. */
export declare function bidiControlIn(value: string): string | null;
/** The API's refusal, e.g. `body.title contains U+202E RIGHT-TO-LEFT OVERRIDE, a control that reorders text; ...`, or null. */
export declare function displayTextProblem(where: string, value: string): string | null;
/** The same rule on a page form: `The name contains U+202E, a character that changes the direction of the text around it (...): type it without.`, or null. */
export declare function bidiControlProblem(what: string, value: string): string | null;
