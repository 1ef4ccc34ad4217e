# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The DKMS build (dkms.conf's MAKE: make -C <this tree> -f compat/dkms.mk
# KDIR=<kernel_source_dir>): the kernel API probes against the kernel DKMS
# builds for (compat/probe.sh writes compat-generated.h), then Kbuild.
# dkms prefixes its own -jN KERNELRELEASE=<kernel>, as for a plain MAKE.
KDIR ?= /lib/modules/$(shell uname -r)/build
tree := $(CURDIR)

modules:
	sh $(tree)/compat/probe.sh $(KDIR) $(tree)/compat-generated.h
	$(MAKE) -C $(KDIR) M=$(tree) modules

.PHONY: modules
