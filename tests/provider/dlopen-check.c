// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Load a provider the way libibverbs does: libibverbs is already in the
 * process (here dlopen()ed RTLD_GLOBAL), then the provider is dlopen()ed
 * with RTLD_NOW, so every undefined symbol must resolve at once and the
 * provider's constructor registers it with libibverbs.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	void *verbs, *prov;

	if (argc != 2) {
		fprintf(stderr, "usage: %s /path/to/libNAME-rdmavNN.so\n", argv[0]);
		return 2;
	}
	verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!verbs) {
		fprintf(stderr, "dlopen libibverbs.so.1: %s\n", dlerror());
		return 1;
	}
	prov = dlopen(argv[1], RTLD_NOW);
	if (!prov) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	printf("loaded %s\n", argv[1]);
	/* Not dlclose()d: libibverbs keeps a pointer to the registered ops. */
	return 0;
}
