import { committedAfter } from '../../../workflows/committed-offset';

describe("a partition's shown committed offset", () => {
  const yes = () => true;
  test('follows a persist that reports a later offset, or the first one', () => {
    expect(committedAfter('11', '99', yes)).toBe('99');
    expect(committedAfter(undefined, '5', yes)).toBe('5');
    expect(committedAfter('5', undefined, yes)).toBe('5');
  });
  test("never goes back for a result that arrives after a later one's (offsets compared as numbers, not strings)", () => {
    expect(committedAfter('99', '11', yes)).toBe('99');
    expect(committedAfter('100', '99', yes)).toBe('100');
    expect(committedAfter('18446744073709551615', '18446744073709551614', yes)).toBe('18446744073709551615');
  });
  test('a run recorded before the patch (mayKeep false) takes the reported one, as it did', () => {
    let asked = 0;
    expect(
      committedAfter('99', '11', () => {
        asked++;
        return false;
      }),
    ).toBe('11');
    expect(asked).toBe(1);
    // The patch is only consulted when a result is behind: no marker in runs that never see one.
    committedAfter('11', '99', () => {
      asked++;
      return true;
    });
    expect(asked).toBe(1);
  });
});
