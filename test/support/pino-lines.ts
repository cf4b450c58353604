/** A line as pino writes it (numeric level, time, msg), parsed; undefined for any other line. */
export function pinoLine(line: string): Record<string, unknown> | undefined {
  try {
    const j = JSON.parse(line) as Record<string, unknown>;
    return typeof j.level === 'number' && typeof j.time === 'number' && typeof j.msg === 'string' ? j : undefined;
  } catch {
    return undefined;
  }
}

/** The non-empty lines of `text` that are not pino lines. */
export function notPinoLines(text: string): string[] {
  return text.split('\n').filter((line) => line.trim() !== '' && pinoLine(line) === undefined);
}
