// The CRI log records the node keeps (test/node-log.ts), parsed as the kubelet parses them
// (staging cri-client pkg/logs/logs.go parseCRILog): `P` records are parts of a line, `F` ends it.
import { expect, it } from 'vitest';
import { criContent } from './node-log.ts';

it('joins P records into their line and ends a line at each F record; a record cut mid-write is taken as it is', () => {
  const file = Buffer.from(
    [
      '2026-12-04T23:39:07.611625973Z stdout F hello',
      '2026-12-04T23:39:07.611625974Z stdout P par',
      '2026-12-04T23:39:07.611625975Z stdout F tial',
      '2026-12-04T23:39:07.611625976Z stderr F ',
      '2026-12-04T23:39:07.611625977Z stdout P 1277',
    ].join('\n'),
  );
  expect(criContent(file).toString()).toBe('hello\npartial\n\n1277');
});
