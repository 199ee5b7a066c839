^mm/src/paging/mod.rs:(729|1311):|^mm/src/paging/bbm.rs:(173|247|446|550|557):| in PageTable<T>::(none_outside|is_emptied|is_vacant|detach_emptied|modify_pages_in)$
