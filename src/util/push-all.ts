// Appends every item of `items` to `out`. Not out.push(...items): a spread passes each item as an
// argument, and lists as long as a 50k-service sync's (hundreds of thousands of ops or elements)
// exceed what one call may take (RangeError: Maximum call stack size exceeded).
export function pushAll<T>(out: T[], items: Iterable<T>): void {
  for (const x of items) out.push(x);
}
