import { describe, expect, it } from 'vitest';
import { confcutdir } from './python.js';
import { recogniseCommand } from './recognise.js';

describe('recogniseCommand', () => {
  it('reads plain runner invocations as the tests they name', () => {
    expect(recogniseCommand('python3 -m unittest -q test_fizzbuzz.FizzBuzzTest.test_fizzbuzz')).toEqual({
      runner: 'unittest',
      ids: ['test_fizzbuzz.FizzBuzzTest.test_fizzbuzz'],
    });
    expect(recogniseCommand('python -m unittest tests/test_x.py test_y')).toEqual({ runner: 'unittest', ids: ['tests.test_x', 'test_y'] });
    expect(recogniseCommand("pytest -q 'tests/test_x.py::test_a[1-2]'")).toEqual({ runner: 'pytest', ids: ['tests/test_x.py::test_a[1-2]'] });
    expect(recogniseCommand('python3.11 -m pytest tests/test_x.py::C::t')).toEqual({ runner: 'pytest', ids: ['tests/test_x.py::C::t'] });
    expect(recogniseCommand('node --test test.js other.test.js')).toEqual({ runner: 'node-test', ids: ['test.js', 'other.test.js'] });
  });

  it('leaves to exit status what it cannot read as named tests', () => {
    for (const c of [
      'npm test',
      'node test.js',
      'python3 -m unittest',
      'python3 -m unittest discover -s tests',
      'pytest -k fizz tests',
      'pytest -c other.ini tests/test_x.py',
      'python3 -m unittest test_x && echo ok',
      'python3 -m unittest "$MOD"',
      'pytest tests/*.py',
      'node --test --import ./setup.mjs test.js',
    ])
      expect(recogniseCommand(c), c).toBeNull();
  });
});

describe('confcutdir', () => {
  it('is the deepest folder every named test lies in', () => {
    expect(confcutdir(['tests/unit/test_a.py::t', 'tests/unit/test_b.py'])).toBe('tests/unit');
    expect(confcutdir(['tests/unit/test_a.py::t', 'tests/api/test_b.py::t'])).toBe('tests');
    expect(confcutdir(['test_a.py::t', 'tests/test_b.py'])).toBe('.');
    expect(confcutdir(['tests/'])).toBe('tests');
  });
});
