import { describe, expect, it } from 'vitest';
import { junitCovers, parseJunit } from './junit.js';

describe('parseJunit', () => {
  it('reads pytest, Surefire and node shapes, entities and self-closing cases', () => {
    const xml = `<?xml version="1.0"?><testsuites><testsuite name="pytest">
      <testcase classname="tests.test_x.T" name="test_a" time="0.1"/>
      <testcase classname="tests.test_x.T" name="test_b[a&amp;b]" time="0.1"><failure message="x">boom</failure></testcase>
      <testcase classname='tests.test_x.T' name='test_c'><skipped/></testcase>
      <testcase name="bare" time="0"><error type="E"/></testcase>
      <testcase classname="tests.test_x.T" name="test_a"><system-out>rerun</system-out></testcase>
    </testsuite></testsuites>`;
    expect([...parseJunit(xml)]).toEqual([
      ['tests.test_x.T.test_a', 'passed'],
      ['tests.test_x.T.test_b[a&b]', 'failed'],
      ['tests.test_x.T.test_c', 'skipped'],
      ['bare', 'failed'],
    ]);
  });

  it('keeps a failure over a later pass of the same test', () => {
    const xml = '<testsuite><testcase classname="c" name="t"><failure/></testcase><testcase classname="c" name="t"/></testsuite>';
    expect(parseJunit(xml).get('c.t')).toBe('failed');
  });

  it('refuses what is not JUnit', () => {
    expect(() => parseJunit('{"tests": {}}')).toThrow(/not JUnit/);
  });

  it('lets a class name its tests, not a prefix of another name', () => {
    expect(junitCovers('m.C', 'm.C.test_a')).toBe(true);
    expect(junitCovers('m.C', 'm.Cx.test_a')).toBe(false);
  });
});
