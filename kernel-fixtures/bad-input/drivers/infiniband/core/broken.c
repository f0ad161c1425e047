// SPDX-License-Identifier: MIT
/* Fixture: syntax errors the parser must survive and report by line. */
int broken_neighbour(int x)
{
	return x + 1;
}

static int half_written(int x)
{
	return x * ;
}

$$ not C at all $$

int after_the_damage(int y)
{
	return y - 1;
}
#endif
