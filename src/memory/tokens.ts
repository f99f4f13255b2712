import { get_encoding, type Tiktoken } from 'tiktoken';

/** Token counts in o200k_base, the tokenizer SPEC.md measures with. The encoder loads on first use (~1 s). */

let encoder: Tiktoken | undefined;

export function countTokens(text: string): number {
  encoder ??= get_encoding('o200k_base');
  // encode_ordinary: text that happens to contain "<|endoftext|>" is counted as text, not refused.
  return encoder.encode_ordinary(text).length;
}
