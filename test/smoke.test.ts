import t from 'tap';
t.test('smoke', async (t) => { t.equal(1 + 1, 2); });
