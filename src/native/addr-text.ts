// Address bytes from the kernel (4 or 16 bytes at an offset of a Buffer) back to their text form.
const AF_INET = 2;

/** Text of the address at b[o..]: dotted quad for AF_INET, RFC 5952 compressed form for AF_INET6. */
export function addrText(b: Buffer, o: number, af: number): string {
  if (af === AF_INET) return `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`;
  const g: string[] = [];
  for (let i = 0; i < 16; i += 2) g.push(b.readUInt16BE(o + i).toString(16));
  // The longest run (of at least two) of zero groups becomes "::".
  let best = -1, len = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== '0') { i++; continue; }
    let j = i;
    while (j < 8 && g[j] === '0') j++;
    if (j - i > len && j - i > 1) { best = i; len = j - i; }
    i = j;
  }
  return best < 0 ? g.join(':') : `${g.slice(0, best).join(':')}::${g.slice(best + len).join(':')}`;
}
