import { pushAll } from './push-all';

test('appends lists longer than a call may take as arguments (a 50k-service sync)', () => {
  const big = Array.from({ length: 500_000 }, (_, i) => i);
  const out: number[] = [];
  expect(() => out.push(...big)).toThrow(RangeError); // why pushAll exists
  out.length = 0;
  pushAll(out, [-1]);
  pushAll(out, big);
  expect(out).toHaveLength(500_001);
  expect(out[500_000]).toBe(499_999);
});
