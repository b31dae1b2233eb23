// Types of scripts/native-typings.mjs (for the tests that import it).
/** native/index.d.ts's text from the lines napi-derive wrote (one JSON object per #[napi] item). */
export declare function typingsOf(text: string): string;
