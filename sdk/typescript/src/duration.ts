/** A wait: milliseconds, or a Go duration string such as "30s", "10m" or "1h30m". */
export type Duration = number | string;

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a Duration; a malformed string throws a TypeError naming it. */
export function toMs(d: Duration): number {
  if (typeof d === 'number') {
    if (!Number.isFinite(d) || d < 0) throw new TypeError(`a wait must be a non-negative number of ms, not ${d}`);
    return d;
  }
  const text = d.trim();
  let ms = 0;
  let rest = text;
  const part = /^(\d+(?:\.\d+)?)(ms|s|m|h)/;
  if (rest === '' ) throw new TypeError('a wait is empty');
  if (rest === '0') return 0;
  while (rest.length > 0) {
    const m = part.exec(rest);
    if (!m) throw new TypeError(`a wait such as "30s" or "10m", not ${JSON.stringify(text)}`);
    ms += Number(m[1]) * units[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return ms;
}

/** The Go duration the API's ?wait takes, rounded down to whole milliseconds. */
export function goDuration(ms: number): string {
  return `${Math.max(0, Math.floor(ms))}ms`;
}
