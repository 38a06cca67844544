import { describe, expect, it } from 'vitest';
import { readDockerfile } from './dockerfile.js';

// What the hand-written reader got wrong (issue 32, 5), now read by dockerfile-ast.
describe('Dockerfile reading (dockerfile-ast)', () => {
  it('ARG and ENV values are substituted in COPY, WORKDIR and FROM, as the build does, with :- and :+', () => {
    const plan = readDockerfile(
      [
        'ARG BASE=debian:12',
        'FROM ${BASE}',
        'ARG SRC=src',
        'ARG UNSET',
        'ENV DEST=lib HOME_DIR=/srv/app',
        'WORKDIR ${HOME_DIR}',
        'COPY ${SRC}/main.py $DEST/',
        'COPY ${UNSET:-fallback}/x.txt ${SRC:+alt}/',
        'COPY ["my file.txt", "${DEST}/data/"]',
      ].join('\n'),
      '/app',
    );
    expect(plan.baseImages).toEqual(['debian:12']);
    expect(plan.workdir).toBe('/srv/app');
    expect(plan.copies.map((c) => [c.line, c.sources, c.dest])).toEqual([
      [7, ['src/main.py'], '/srv/app/lib'],
      [8, ['fallback/x.txt'], '/srv/app/alt'],
      [9, ['my file.txt'], '/srv/app/lib/data'],
    ]);
    expect(plan.problems).toEqual([]);
  });

  it('an ARG with no default is empty, as in a build given no --build-arg (Harbor passes none)', () => {
    const plan = readDockerfile('FROM a\nARG DIR\nWORKDIR /app\nCOPY src$DIR/ ./\n', '/app');
    expect(plan.copies[0]!.sources).toEqual(['src/']);
  });

  it('# escape=` makes ` the line continuation (a \\ is then a plain character)', () => {
    const plan = readDockerfile('# escape=`\nFROM a\nWORKDIR /app\nCOPY one.txt `\n  two.txt `\n  ./data/\nRUN echo a `\n  && echo b\n', '/app');
    expect(plan.copies.map((c) => [c.line, c.sources, c.dest, c.destIsDir])).toEqual([[4, ['one.txt', 'two.txt'], '/app/data', true]]);
    expect(plan.skipped).toEqual(['RUN echo a && echo b']);
    expect(plan.problems).toEqual([]);
  });

  it('a heredoc RUN is one step: the lines in its body are not instructions (a COPY there copies nothing)', () => {
    const plan = readDockerfile('FROM a\nWORKDIR /app\nRUN <<EOT bash\nset -e\nCOPY secret.txt /app/\nEOT\nCOPY real.txt ./\n', '/app');
    expect(plan.copies.map((c) => [c.line, c.sources])).toEqual([[7, ['real.txt']]]);
    expect(plan.skipped).toEqual(['RUN <<EOT bash set -e COPY secret.txt /app/ EOT']);
  });

  it('a heredoc COPY is written by the image build, not copied from environment/', () => {
    const plan = readDockerfile('FROM a\nWORKDIR /app\nCOPY <<EOF /app/hello.txt\nhi\nEOF\n', '/app');
    expect(plan.copies).toEqual([]);
    expect(plan.skipped).toEqual([expect.stringMatching(/^COPY <<EOF \/app\/hello\.txt hi EOF {2}\(a heredoc: written by the image build only\)$/)]);
  });

  it('keeps what the old reader did: flags, --from, URLs, the last stage, a COPY without a destination', () => {
    const plan = readDockerfile(
      'FROM a AS build\nCOPY x /x\nFROM b\nworkdir /app\nCOPY --chown=1:1 a.txt ./\nCOPY --from=build /x /y\nADD https://example.com/f.tgz /app/\nCOPY lonely\n',
      '/app',
    );
    expect(plan.baseImages).toEqual(['a', 'b']);
    expect(plan.copies.map((c) => [c.sources, c.dest])).toEqual([[['a.txt'], '/app']]);
    expect(plan.skipped).toEqual([expect.stringMatching(/--from=build.*another stage/), expect.stringMatching(/URL/)]);
    expect(plan.problems).toEqual([{ line: 8, what: 'COPY needs a source and a destination' }]);
  });
});
