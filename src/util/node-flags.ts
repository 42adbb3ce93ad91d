// The V8 and node flags the user gave this process (node's command line and NODE_OPTIONS): kpng
// sets a V8 flag of its own only when the user did not choose it.
export function userNodeFlags(): string {
  return `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`;
}
