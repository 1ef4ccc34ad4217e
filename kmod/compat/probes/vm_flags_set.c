// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Linux 6.3: vma->vm_flags is read-only; vm_flags_set()/vm_flags_clear(). */
#include <linux/mm.h>

void mbcf_probe(struct vm_area_struct *vma);
void mbcf_probe(struct vm_area_struct *vma)
{
	vm_flags_set(vma, VM_DONTEXPAND);
	vm_flags_clear(vma, VM_DONTDUMP);
}
