import { sameJson } from './same-json';

describe('sameJson', () => {
  const cases: Array<[unknown, unknown]> = [
    [{ a: 1, b: [1, 'x', { c: null }] }, { a: 1, b: [1, 'x', { c: null }] }],
    [{ a: 1, b: 2 }, { b: 2, a: 1 }],
    [{ a: 1, u: undefined }, { a: 1 }],
    [[1, 2], [1, 2, 3]],
    [{ a: [] }, { a: {} }],
    ['1', 1],
    [null, {}],
    [{ a: { b: { c: 'x' } } }, { a: { b: { c: 'y' } } }],
    [NaN, NaN],
  ];
  test.each(cases)('agrees with comparing JSON texts: %j vs %j', (a, b) => {
    expect(sameJson(a, b)).toBe(JSON.stringify(a) === JSON.stringify(b));
  });
});
