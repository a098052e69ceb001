/**
 * Parsers of the CLI's numeric arguments: plain decimal notation only (`0x10`, `1e3` and `0b1`
 * are refused, as an option given in an unusual notation is more likely a mistake than meant).
 * @module
 */
import { InvalidArgumentError } from 'commander';

/** An integer in `[min, max]`, written in decimal digits. */
export function bounded(name: string, min: number, max: number): (value: string) => number {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

/** A number in `[0, 1]`, written in decimal notation (`0.85`, `.9`, `1`). */
export function fraction(value: string): number {
  const n = Number(value);
  if (!/^\s*(\d+(\.\d*)?|\.\d+)\s*$/.test(value) || n > 1) throw new InvalidArgumentError('must be a number in [0, 1]');
  return n;
}
